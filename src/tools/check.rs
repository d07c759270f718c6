//! Checks of gold calls against their tools, used by the seq converters (API-BLEND issue rules)
//! and the BFCL gold lint:
//!
//! - every call validates against its tool's JSON Schema ([`Checker::validate`], the
//!   `jsonschema` crate);
//! - every string argument value is *grounded*: it occurs in the utterance (case-insensitive,
//!   whitespace-normalised), is a canonical value of the parameter (`enum`), or is a `$label$`
//!   reference to an earlier call ([`Checker::ungrounded`]);
//!
//! The seq report numbers built on these checks are `crate::seq::stats::SeqStats`.

use std::collections::HashMap;

use serde_json::Value;

use super::{Call, ToolSpec, as_label_ref};

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

#[cfg(test)]
mod tests {
    use serde_json::json;

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
