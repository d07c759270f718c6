//! The results of one SLOT/SEL/REST example's calls as a trajectory shows them (issue 17):
//! computed by the compile stage, which executes every call to verify it, and carried to the
//! trajectories emitter in [`crate::dataset::Build::shown`] so that emitting does not execute the
//! calls again.
//!
//! The text is the same whichever side computes it: the compile stage ([`Shown::of_session`],
//! from its SLOT/SEL verification session; [`Shown::of_rest`], from the REST endpoint execution
//! that verified the question) and the emitter (executing step by step, when the compile stage
//! was served from the store or a label repeats) both write each SLOT/SEL result with
//! [`result_text`], each setup table with `value_json(table, 0)` and each REST response with
//! [`rest_result_text`].

use serde_json::{Value as Json, json};

use super::Call;
use super::executor::{Session, value_json};
use crate::verify::Answer;

/// The shown results of an example's setup steps and calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// The setup steps, then the calls, these results are of ([`Shown::is_of`] checks them).
    steps: Vec<Call>,
    /// The row cap the results were cut to.
    max_rows: usize,
    /// Each setup step's table as `value_json(table, 0)` (its columns and total rows, no rows).
    pub tables: Vec<Json>,
    /// Each call's tool-message content, JSON text `{"label": L, "output": value_json(v,
    /// max_rows)}`.
    pub results: Vec<String>,
}

impl Shown {
    /// The results of `setup` then `calls` from `session`, in which they were all executed in
    /// that order; `None` when a label repeats (a later output replaced an earlier one in the
    /// session, so the earlier one is no longer there to show) or an output is missing.
    pub fn of_session(session: &Session, setup: &[&Call], calls: &[Call], max_rows: usize) -> Option<Shown> {
        let mut labels = std::collections::HashSet::new();
        if !setup
            .iter()
            .copied()
            .chain(calls)
            .all(|c| labels.insert(c.label.as_str()))
        {
            return None;
        }
        let tables = setup
            .iter()
            .map(|s| session.get(&s.label).map(|v| value_json(v, 0)))
            .collect::<Option<_>>()?;
        let results = calls
            .iter()
            .map(|c| session.get(&c.label).map(|v| result_text(&c.label, v, max_rows)))
            .collect::<Option<_>>()?;
        Some(Shown {
            steps: setup.iter().copied().chain(calls).cloned().collect(),
            max_rows,
            tables,
            results,
        })
    }

    /// The results of a REST example's `calls` (no setup step): `results`, each call's response
    /// as [`rest_result_text`] wrote it from the endpoint execution that verified the question.
    pub fn of_rest(calls: &[Call], results: Vec<String>, max_rows: usize) -> Shown {
        Shown {
            steps: calls.to_vec(),
            max_rows,
            tables: Vec::new(),
            results,
        }
    }

    /// Whether these are the results of `setup` then `calls` cut to `max_rows` rows.
    pub fn is_of(&self, setup: &[&Call], calls: &[Call], max_rows: usize) -> bool {
        self.max_rows == max_rows
            && self.steps.len() == setup.len() + calls.len()
            && self
                .steps
                .iter()
                .zip(setup.iter().copied().chain(calls))
                .all(|(a, b)| a == b)
    }
}

/// One tool message's content: `{"label": label, "output": value_json(v, max_rows)}` as JSON
/// text.
pub fn result_text(label: &str, v: &super::executor::Value, max_rows: usize) -> String {
    json!({"label": label, "output": value_json(v, max_rows)}).to_string()
}

/// One REST tool message's content: the endpoint's response `rows` as a JSON array; over
/// `max_rows` rows, `{"rows": [first max_rows], "total_rows": n, "truncated": true}`.
pub fn rest_result_text(rows: &Answer, max_rows: usize) -> String {
    if rows.len() > max_rows {
        json!({"rows": rows[..max_rows], "total_rows": rows.len(), "truncated": true}).to_string()
    } else {
        serde_json::to_string(rows).unwrap_or_default()
    }
}
