//! Executing a predicted sequence, for the completion rate (Live API-Bench §4.1.1) and the
//! DynamicToolBench pass rate.
//!
//! - SLOT/SEL: the row's setup steps (run by the framework: the join step and any
//!   `additional_setup_steps`), then the predicted calls, on the project's executor
//!   ([`crate::tools::executor::Executor::run_with_setup`]); the final answer is built from the
//!   predicted calls' sinks only — a setup table the prediction does not read is not part of it,
//!   as in a `serve` session.
//! - REST: each predicted call goes to the endpoint of that name in the row's database as the
//!   `GET` query string an HTTP client sends for its arguments ([`query_pairs`]), read exactly as
//!   `toolforge serve` and FastAPI read it ([`Endpoint::arguments_from_query`]: pydantic's lax
//!   numbers, so `max_year=1980.0` is the integer 1980; a parameter the endpoint does not declare
//!   is ignored; checked against FastAPI 0.165 with pydantic 2), SQL run with bound values; the
//!   final answer is the last call's rows. Drift rows go through A_new first, as `serve` does.
//! - Obfuscated rows (`variant_kind = obfuscate`): calls are mapped back through the row's
//!   mapping first. Drifted rows (`variant_kind = drift`): every call must be valid under A_new
//!   exactly as `serve` enforces it ([`Drift::check_body`] for tools, [`Drift::check_query`] for
//!   REST query strings), and is un-migrated to the A_old call that runs; an A_old name that no
//!   longer exists fails like the server's 404.
//!
//! The answer is compared with `gold_answer` by [`crate::verify::answers_match`] (the comparison
//! verification uses). A predicted `initialize_active_data` is refused: the setup step is the
//! framework's, never the model's.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value};

use super::rows::{EvalRow, EvalSet, SETUP_TOOL};
use crate::tools::Call;
use crate::tools::executor::Executor;
use crate::tools::rest::{Endpoint, Limits};
use crate::variants::drift::Drift;
use crate::verify::{Answer, answers_match};

/// Runs predictions against a dataset's tools (thread-safe; SQLite connections pooled per
/// database).
pub struct Runner<'s> {
    set: &'s EvalSet,
    executor: Option<Executor>,
    pool: Mutex<HashMap<String, Vec<rusqlite::Connection>>>,
    endpoints: HashMap<(String, String), usize>,
}

/// Text of a JSON value as an HTTP client puts it in a query string.
fn query_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A call's arguments as the query string an HTTP client sends for them: each value as text
/// ([`query_text`]), a list as the parameter repeated, a null left out (the parameter absent).
fn query_pairs(args: &Map<String, Value>) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (k, v) in args {
        match v {
            Value::Null => {}
            Value::Array(items) => pairs.extend(items.iter().map(|x| (k.clone(), query_text(x)))),
            other => pairs.push((k.clone(), query_text(other))),
        }
    }
    pairs
}

impl<'s> Runner<'s> {
    /// A runner over `set` (`None` executor when the dataset has no database root).
    pub fn new(set: &'s EvalSet) -> Runner<'s> {
        Runner {
            executor: set.database_root.as_ref().map(Executor::new),
            pool: Mutex::new(HashMap::new()),
            endpoints: set
                .endpoints
                .iter()
                .enumerate()
                .map(|(i, e)| ((e.db_id.clone(), e.name.clone()), i))
                .collect(),
            set,
        }
    }

    /// Whether rows of this dataset can be executed (SLOT/SEL/REST with databases).
    pub fn executes(&self) -> bool {
        self.executor.is_some() && ["slot", "sel", "rest"].contains(&self.set.format.as_str())
    }

    fn endpoint(&self, db: &str, name: &str) -> Option<&'s Endpoint> {
        self.endpoints
            .get(&(db.to_string(), name.to_string()))
            .map(|&i| &self.set.endpoints[i])
    }

    fn run_endpoint(&self, ep: &Endpoint, values: &[Value]) -> Result<Answer, String> {
        let root = self.set.database_root.as_ref().ok_or("no database root")?;
        let conn = self.pool.lock().expect("pool").get_mut(&ep.db_id).and_then(Vec::pop);
        let mut conn = match conn {
            Some(c) => c,
            None => {
                let path = root.join(&ep.db_id).join(format!("{}.sqlite", ep.db_id));
                crate::tools::table::open_read_only(&path).map_err(|e| format!("{}: {e}", path.display()))?
            }
        };
        let r = ep
            .execute(&mut conn, values, Limits::default())
            .map_err(|e| e.to_string());
        self.pool
            .lock()
            .expect("pool")
            .entry(ep.db_id.clone())
            .or_default()
            .push(conn);
        r
    }

    /// The A_old calls a prediction runs as (obfuscation undone; under drift, A_new enforced
    /// and un-migrated — SLOT/SEL only; REST drift is checked per call in [`Runner::answer`]).
    fn prepared(&self, row: &EvalRow, pred: &[Call]) -> Result<Vec<Call>, String> {
        if let Some(c) = pred.iter().find(|c| c.name == SETUP_TOOL) {
            return Err(format!("`{}` is the framework's setup step, not a model call", c.name));
        }
        let mut calls = pred.to_vec();
        if row.variant_kind() == Some("obfuscate") {
            calls = crate::variants::obfuscate::deobfuscate(&calls, &row.meta["variant"]["mapping"]);
        }
        if row.variant_kind() == Some("drift") && self.set.format != "rest" {
            let drift = self.set.drift.as_ref().ok_or("drift row but no tools/drift.json")?;
            // Per-instance drift: the row's own A_new (as `serve` enforces it in its session).
            let instance = match drift.scope {
                crate::variants::drift::Scope::Instance => Some(
                    Drift::of_instance(&self.set.format, &row.tools, &row.meta["variant"])
                        .ok_or("drift row without a change log")?,
                ),
                crate::variants::drift::Scope::Tool => None,
            };
            let drift = instance.as_ref().unwrap_or(drift);
            calls = calls
                .iter()
                .map(|c| match drift.check_body(&c.name, &c.arguments, &c.label) {
                    Ok(Some(old)) => Ok(old),
                    Ok(None) => Ok(c.clone()),
                    Err(None) => Err(format!("404: no tool named {:?} under A_new", c.name)),
                    Err(Some(detail)) => Err(format!("422 {}: {}", c.name, Value::Array(detail))),
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(calls)
    }

    /// One REST call under A_new (drift rows): the endpoint and A_old arguments it runs with.
    fn rest_drifted(&self, drift: &Drift, db: &str, call: &Call) -> Result<(&'s Endpoint, Map<String, Value>), String> {
        match drift.by_new_name(Some(db), &call.name) {
            Some(d) => {
                // A `POST` after verb evolution takes the arguments as a JSON body.
                let old = if d.is_post() {
                    Drift::check_json(d, &call.arguments)
                } else {
                    let pairs: Vec<(String, String)> =
                        call.arguments.iter().map(|(k, v)| (k.clone(), query_text(v))).collect();
                    Drift::check_query(d, &pairs)
                }
                .map_err(|e| format!("422 {}: {}", call.name, Value::Array(e)))?;
                let ep = self
                    .endpoint(db, &d.old.name)
                    .ok_or_else(|| format!("no endpoint {:?} in {db}", d.old.name))?;
                Ok((ep, old))
            }
            None => {
                if drift
                    .by_old_name(Some(db), &call.name)
                    .is_some_and(|d| d.new.name != call.name)
                {
                    return Err(format!("404: {:?} no longer exists under A_new", call.name));
                }
                let ep = self
                    .endpoint(db, &call.name)
                    .ok_or_else(|| format!("404: no endpoint {:?} in {db}", call.name))?;
                Ok((ep, call.arguments.clone()))
            }
        }
    }

    /// The final answer of a predicted sequence (module docs), or why it fails.
    pub fn answer(&self, row: &EvalRow, pred: &[Call]) -> Result<Answer, String> {
        let calls = self.prepared(row, pred)?;
        if self.set.format == "rest" {
            let db = row.db_id.as_deref().ok_or("REST row without db_id")?;
            let drift = self.set.drift.as_ref().filter(|_| row.variant_kind() == Some("drift"));
            let mut last = Err("no call was made".to_string());
            for c in &calls {
                let (ep, values) = match drift {
                    Some(d) => {
                        let (ep, args) = self.rest_drifted(d, db, c)?;
                        (ep, ep.arguments_from_json(&args))
                    }
                    None => {
                        let ep = self
                            .endpoint(db, &c.name)
                            .ok_or_else(|| format!("404: no endpoint {:?} in {db}", c.name))?;
                        (ep, ep.arguments_from_query(&query_pairs(&c.arguments)))
                    }
                };
                let values = values.map_err(|e| format!("422 {}: {}", c.name, Value::Array(e)))?;
                last = Ok(self.run_endpoint(ep, &values)?);
            }
            return last;
        }
        let executor = self.executor.as_ref().ok_or("no database root")?;
        if calls.is_empty() {
            return Err("no call was made".into());
        }
        // The setup tables are the framework's, loaded before the model's calls: never part of
        // the answer, whether or not the prediction reads them (as in a `serve` session).
        let setup: Vec<&Call> = row.setup.iter().collect();
        executor.run_with_setup(&setup, &calls).map_err(|e| e.to_string())
    }

    /// Completion: `Some(Ok(()))` when the prediction's answer matches `gold_answer`,
    /// `Some(Err(why))` otherwise, `None` for a row without a gold answer or a dataset that does
    /// not execute.
    pub fn completion(&self, row: &EvalRow, pred: &[Call]) -> Option<Result<(), String>> {
        let gold = row.gold_answer.as_ref()?;
        if !self.executes() {
            return None;
        }
        Some(self.answer(row, pred).and_then(|got| {
            if answers_match(gold, &got, row.ordered) {
                Ok(())
            } else {
                Err(format!(
                    "answer differs from gold_answer ({} rows vs {})",
                    got.len(),
                    gold.len()
                ))
            }
        }))
    }
}

/// Most rows of a tool output shown to an agent.
pub const OBSERVATION_ROWS: usize = 20;

impl Runner<'_> {
    /// An agent's session for `row`: the setup step run by the framework (SLOT/SEL), or an empty
    /// session (REST and datasets without live tools).
    pub fn open_session(&self, row: &EvalRow) -> Result<crate::tools::executor::Session, String> {
        let mut session = crate::tools::executor::Session::default();
        if let Some(executor) = &self.executor {
            for setup in &row.setup {
                executor.step(&mut session, setup)?;
            }
        }
        Ok(session)
    }

    /// One live call of an agent (the `serve` semantics in-process): SLOT/SEL run in `session`,
    /// REST on the endpoint; drift and obfuscation as in [`Runner::answer`]. Returns the tool
    /// output as JSON (at most [`OBSERVATION_ROWS`] rows), or the error a server would answer.
    /// Datasets without live tools record the call and answer a note saying so.
    pub fn live_call(
        &self,
        row: &EvalRow,
        session: &mut crate::tools::executor::Session,
        call: &Call,
    ) -> Result<Value, String> {
        if !self.executes() {
            return Ok(Value::String("call recorded (this dataset has no live tools)".into()));
        }
        if self.set.format == "rest" {
            let rows = self.answer(row, std::slice::from_ref(call))?;
            let total = rows.len();
            let shown: Vec<Value> = rows
                .into_iter()
                .take(OBSERVATION_ROWS)
                .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
                .collect();
            return Ok(if total > OBSERVATION_ROWS {
                serde_json::json!({"rows": shown, "total_rows": total, "truncated": true})
            } else {
                Value::Array(shown)
            });
        }
        let calls = self.prepared(row, std::slice::from_ref(call))?;
        let executor = self.executor.as_ref().ok_or("no database root")?;
        let v = executor.step(session, &calls[0])?;
        Ok(crate::tools::executor::value_json(v, OBSERVATION_ROWS))
    }
}
