//! The report numbers of a seq dataset ([`SeqStats`]): calls per example, arguments per call,
//! calls failing their JSON Schema and ungrounded argument values, counted with the checks of
//! [`crate::tools::check`].

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::dataset::Example;
use crate::tools::check::Checker;

/// The report's `paper_sizes` block: the published size of each split (API-BLEND Table 1), as
/// `{split: size}` in the given order.
pub fn paper_sizes(sizes: &[(&str, usize)]) -> Value {
    Value::Object(sizes.iter().map(|(k, v)| (k.to_string(), json!(v))).collect())
}

/// Report numbers of one seq dataset.
#[derive(Debug, Default)]
pub struct SeqStats {
    examples: usize,
    calls: usize,
    arguments: usize,
    max_calls: usize,
    calls_histogram: BTreeMap<usize, usize>,
    ungrounded: usize,
    ungrounded_samples: Vec<Value>,
    invalid: usize,
}

impl SeqStats {
    /// Counts one kept example; checks its calls with `checker` against its `input`.
    pub fn add(&mut self, example: &Example, checker: &Checker) {
        self.examples += 1;
        self.calls += example.output.len();
        self.max_calls = self.max_calls.max(example.output.len());
        *self.calls_histogram.entry(example.output.len()).or_insert(0) += 1;
        for call in &example.output {
            self.arguments += call.arguments.len();
            if checker.validate(call).is_err() {
                self.invalid += 1;
            }
            for (arg, value) in checker.ungrounded(call, &example.input) {
                self.ungrounded += 1;
                if self.ungrounded_samples.len() < 20 {
                    self.ungrounded_samples
                        .push(json!({"id": example.id, "tool": call.name, "argument": arg, "value": value}));
                }
            }
        }
    }

    /// The numbers as report `stats` entries.
    pub fn into_json(self) -> serde_json::Map<String, Value> {
        let ratio = |a: usize, b: usize| {
            if b == 0 {
                0.0
            } else {
                (a as f64 / b as f64 * 100.0).round() / 100.0
            }
        };
        let mut m = serde_json::Map::new();
        m.insert("calls_per_example".into(), json!(ratio(self.calls, self.examples)));
        m.insert("arguments_per_call".into(), json!(ratio(self.arguments, self.calls)));
        m.insert("max_calls".into(), json!(self.max_calls));
        m.insert(
            "examples_by_call_count".into(),
            json!(
                self.calls_histogram
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect::<serde_json::Map<_, _>>()
            ),
        );
        m.insert("calls_failing_schema".into(), json!(self.invalid));
        m.insert("ungrounded_values".into(), json!(self.ungrounded));
        m.insert("ungrounded_samples".into(), json!(self.ungrounded_samples));
        m
    }
}
