//! Tool specs inferred from the annotations: one tool per intent, one parameter per slot type
//! seen with that intent. Shared by the MixATIS/MixSNIPS and TOPv2 converters.
//!
//! Conversion runs in two passes: every call is first collected as a [`RawCall`] (tool,
//! `(parameter, value)` pairs in utterance order) and observed by a [`Shapes`]; then the
//! catalog is fixed ([`Shapes::catalog`]) and each raw call becomes a [`Call`]
//! ([`Shapes::call`]). A parameter is a JSON `string`; when some call of the tool carries that
//! slot more than once, the parameter accepts a string *or* an array of at least two strings
//! (`anyOf`), and exactly the calls with several mentions use the array (in utterance order), so
//! that the common single-mention call stays a plain string.
//!
//! `required` is always empty: an NLU slot is optional by nature (a user may ask for "flights"
//! without naming a city), and a list inferred from the sample would turn coincidences of the
//! corpus into constraints that reject valid calls.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::tools::{Call, ToolSpec};

/// A call before the catalog is known.
#[derive(Debug, Clone, PartialEq)]
pub struct RawCall {
    /// Tool name (sanitised intent).
    pub tool: String,
    /// `(parameter, value)` pairs in utterance order; a parameter may repeat.
    pub args: Vec<(String, String)>,
}

#[derive(Debug, Default)]
struct ToolShape {
    description: String,
    params: BTreeMap<String, ParamShape>,
}

#[derive(Debug, Default)]
struct ParamShape {
    description: String,
    repeated: bool,
}

/// The tools and parameters observed so far.
#[derive(Debug, Default)]
pub struct Shapes {
    tools: BTreeMap<String, ToolShape>,
}

/// `[a-z0-9_]` identifier for a source intent or slot name: lower-case, CamelCase split with
/// `_`, every other character (`.`, `:`, `-`) becomes `_`.
pub fn identifier(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    out.trim_matches('_').to_string()
}

/// Words of an identifier, for descriptions (`fromloc_city_name` → `fromloc city name`).
pub fn words(name: &str) -> String {
    name.split('_').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

impl Shapes {
    /// Declares a tool (first description wins).
    pub fn tool(&mut self, tool: &str, description: impl FnOnce() -> String) {
        self.tools.entry(tool.to_string()).or_insert_with(|| ToolShape {
            description: description(),
            params: BTreeMap::new(),
        });
    }

    /// Declares a parameter of a declared tool (first description wins).
    pub fn param(&mut self, tool: &str, param: &str, description: impl FnOnce() -> String) {
        let t = self.tools.entry(tool.to_string()).or_default();
        t.params.entry(param.to_string()).or_insert_with(|| ParamShape {
            description: description(),
            repeated: false,
        });
    }

    /// Records which parameters of `call` repeat. Tool and parameters must be declared.
    pub fn observe(&mut self, call: &RawCall) {
        let t = self.tools.entry(call.tool.clone()).or_default();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (p, _) in &call.args {
            *seen.entry(p).or_insert(0) += 1;
        }
        for (p, n) in seen {
            let shape = t.params.entry(p.to_string()).or_default();
            shape.repeated |= n > 1;
        }
    }

    /// The catalog, tools sorted by name.
    pub fn catalog(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|(name, t)| {
                let props: serde_json::Map<String, Value> = t
                    .params
                    .iter()
                    .map(|(p, s)| {
                        let schema = if s.repeated {
                            json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 2}],
                                   "description": format!("{} Several mentions: an array, in utterance order.", s.description)})
                        } else {
                            json!({"type": "string", "description": s.description})
                        };
                        (p.clone(), schema)
                    })
                    .collect();
                ToolSpec {
                    name: name.clone(),
                    description: t.description.clone(),
                    parameters: json!({"type": "object", "properties": props, "required": [], "additionalProperties": false}),
                    output_parameters: json!({"type": "object", "description": format!("The result of {name}; later calls refer to it as $label$.")}),
                }
            })
            .collect()
    }

    /// The final call of `raw`, labelled `label`.
    pub fn call(&self, raw: &RawCall, label: String) -> Call {
        let mut grouped: Vec<(&str, Vec<&str>)> = Vec::new();
        for (p, v) in &raw.args {
            match grouped.iter_mut().find(|(q, _)| q == p) {
                Some((_, vs)) => vs.push(v),
                None => grouped.push((p, vec![v])),
            }
        }
        let arguments = grouped
            .into_iter()
            .map(|(p, vs)| {
                let value = match vs.as_slice() {
                    [one] => json!(one),
                    many => json!(many),
                };
                (p.to_string(), value)
            })
            .collect();
        Call {
            name: raw.tool.clone(),
            arguments,
            label,
        }
    }
}

/// Labels `<tool>_<n>` for a sequence of tool names, `n` counting from 1 per tool.
pub fn labels<'a>(tools: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    tools
        .into_iter()
        .map(|t| {
            let n = count.entry(t).or_insert(0);
            *n += 1;
            format!("{t}_{n}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert_eq!(identifier("PlayMusic"), "play_music");
        assert_eq!(identifier("atis_flight_no"), "atis_flight_no");
        assert_eq!(identifier("fromloc.city_name"), "fromloc_city_name");
        assert_eq!(identifier("IN:GET_LOCATION_HOME"), "in_get_location_home");
        assert_eq!(identifier("GET_LOCATION_HOME"), "get_location_home");
        assert_eq!(labels(["a", "b", "a"]), vec!["a_1", "b_1", "a_2"]);
    }

    #[test]
    fn repeated_parameter_is_an_array_only_when_repeated() {
        let mut s = Shapes::default();
        s.tool("t", || "d".into());
        s.param("t", "city", || "c".into());
        let two = RawCall {
            tool: "t".into(),
            args: vec![("city".into(), "a".into()), ("city".into(), "b".into())],
        };
        let one = RawCall {
            tool: "t".into(),
            args: vec![("city".into(), "a".into())],
        };
        s.observe(&two);
        s.observe(&one);
        assert_eq!(
            Value::Object(s.call(&one, "t_1".into()).arguments),
            json!({"city": "a"})
        );
        assert_eq!(
            Value::Object(s.call(&two, "t_1".into()).arguments),
            json!({"city": ["a", "b"]})
        );
        let schema = &s.catalog()[0].parameters["properties"]["city"];
        assert_eq!(schema["anyOf"][1]["type"], "array", "{schema}");
        assert_eq!(s.catalog()[0].parameters["properties"].as_object().unwrap().len(), 1);
    }
}
