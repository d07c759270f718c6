//! What the eval tests share: the gold of rows as a model's text answer.

use serde_json::{Value, json};
use toolforge::eval::rows::EvalSet;

/// The gold of each row as the model's text answer, keyed by the row's request.
pub fn gold_answers(set: &EvalSet, ids: &[&str]) -> Vec<(String, String)> {
    ids.iter()
        .map(|id| {
            let row = set.rows.iter().find(|r| r.id == *id).unwrap();
            let calls: Vec<Value> = row
                .gold
                .iter()
                .map(|c| json!({"name": c.name, "arguments": c.arguments, "label": c.label}))
                .collect();
            (row.input.clone(), Value::Array(calls).to_string())
        })
        .collect()
}
