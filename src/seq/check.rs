//! Checks every seq converter applies to its output (API-BLEND issue rules):
//!
//! - every call validates against its tool's JSON Schema ([`Checker::validate`], the
//!   `jsonschema` crate);
//! - every string argument value is *grounded*: it occurs in the utterance (case-insensitive,
//!   whitespace-normalised), is a canonical value of the parameter (`enum`), or is a `$label$`
//!   reference to an earlier call ([`Checker::ungrounded`]);
//! - [`SeqStats`] accumulates calls per example, arguments per call and ungrounded values for the
//!   report.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use crate::dataset::Example;
use crate::tools::{Call, ToolSpec, as_label_ref};

/// Compiled validators of one catalog.
pub struct Checker {
    tools: HashMap<String, (jsonschema::Validator, Value)>,
}

/// Lower-case, single-spaced text, for containment tests.
pub fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

impl Checker {
    /// Compiles the parameter schema of every tool. Errors name the tool whose schema is invalid.
    pub fn new(catalog: &[ToolSpec]) -> Result<Checker, String> {
        let mut tools = HashMap::new();
        for t in catalog {
            let v = jsonschema::validator_for(&t.parameters)
                .map_err(|e| format!("tool {}: invalid parameters schema: {e}", t.name))?;
            tools.insert(t.name.clone(), (v, t.parameters.clone()));
        }
        Ok(Checker { tools })
    }

    /// `Ok` if the call names a catalog tool and its arguments validate; else the first error,
    /// naming the tool and the JSON pointer of the offending argument.
    pub fn validate(&self, call: &Call) -> Result<(), String> {
        let (v, _) = self
            .tools
            .get(&call.name)
            .ok_or_else(|| format!("call {}: no such tool in the catalog", call.name))?;
        let args = Value::Object(call.arguments.clone());
        match v.iter_errors(&args).next() {
            None => Ok(()),
            Some(e) => Err(format!("call {}: {} at '{}'", call.name, e, e.instance_path())),
        }
    }

    /// The `(argument, value)` pairs of string values (also inside arrays) that are neither in
    /// `utterance` nor canonical values of the parameter nor label references.
    pub fn ungrounded(&self, call: &Call, utterance: &str) -> Vec<(String, String)> {
        let text = normalise(utterance);
        let schema = self.tools.get(&call.name).map(|(_, s)| s);
        let mut out = Vec::new();
        for (arg, value) in &call.arguments {
            let enumerated: Vec<&Value> = schema
                .and_then(|s| s["properties"][arg]["enum"].as_array())
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            let values: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                v => vec![v],
            };
            for v in values {
                let Some(s) = v.as_str() else { continue };
                if as_label_ref(v).is_some() || enumerated.contains(&v) || text.contains(&normalise(s)) {
                    continue;
                }
                out.push((arg.clone(), s.to_string()));
            }
        }
        out
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "book".into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}, "kind": {"type": "string", "enum": ["cheap", "expensive"]}}, "required": ["city"]}),
            output_parameters: json!({}),
        }
    }

    fn call(args: Value) -> Call {
        Call {
            name: "book".into(),
            arguments: args.as_object().unwrap().clone(),
            label: "book_1".into(),
        }
    }

    #[test]
    fn validation_names_tool_and_field() {
        let c = Checker::new(&[tool()]).unwrap();
        assert!(c.validate(&call(json!({"city": "Boston"}))).is_ok());
        let err = c.validate(&call(json!({"kind": "cheap"}))).unwrap_err();
        assert!(err.contains("book") && err.contains("city"), "{err}");
        let err = c.validate(&call(json!({"city": "x", "kind": "free"}))).unwrap_err();
        assert!(err.contains("/kind"), "{err}");
    }

    #[test]
    fn grounding_accepts_utterance_spans_enums_and_labels() {
        let c = Checker::new(&[tool()]).unwrap();
        let u = "Book something  CHEAP in new   York";
        assert!(
            c.ungrounded(&call(json!({"city": "New York", "kind": "cheap"})), u)
                .is_empty()
        );
        assert!(c.ungrounded(&call(json!({"city": "$get_city_1$"})), u).is_empty());
        assert_eq!(
            c.ungrounded(&call(json!({"city": "Boston"})), u),
            vec![("city".to_string(), "Boston".to_string())]
        );
    }
}
