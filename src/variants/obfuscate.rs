//! `obfuscate` ([`obfuscate`]): every toolkit function renamed `FUNC_i` (toolkit order) and its
//! parameters `ARG_j` (schema order, top level); the gold calls renamed accordingly; the mapping
//! is kept in `meta.variant` and [`deobfuscate`] maps calls back. Preserves: descriptions,
//! types, enums, labels and `$LABEL$` references, the setup step.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::variant_row;
use crate::dataset::Example;
use crate::tools::{Call, ToolSpec};

/// The obfuscation mapping of a toolkit: `functions` `FUNC_i` → name, `arguments` `FUNC_i` →
/// {`ARG_j` → parameter}.
pub fn obfuscation_mapping(tools: &[ToolSpec]) -> Value {
    let mut functions = Map::new();
    let mut arguments = Map::new();
    for (i, t) in tools.iter().enumerate() {
        let f = format!("FUNC_{i}");
        functions.insert(f.clone(), json!(t.name));
        let args: Map<String, Value> = t.parameters["properties"]
            .as_object()
            .map(|m| {
                m.keys()
                    .enumerate()
                    .map(|(j, k)| (format!("ARG_{j}"), json!(k)))
                    .collect()
            })
            .unwrap_or_default();
        arguments.insert(f, Value::Object(args));
    }
    json!({"functions": functions, "arguments": arguments})
}

fn invert(m: &Map<String, Value>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(k, v)| (v.as_str().unwrap_or_default().to_string(), k.clone()))
        .collect()
}

/// The obfuscate variant of `e` (module docs).
pub fn obfuscate(e: &Example) -> Example {
    let mapping = obfuscation_mapping(&e.tools);
    let fun_of: BTreeMap<String, String> = invert(mapping["functions"].as_object().expect("object"));
    let tools: Vec<ToolSpec> = e
        .tools
        .iter()
        .map(|t| {
            let f = &fun_of[&t.name];
            let arg_of = invert(mapping["arguments"][f].as_object().expect("object"));
            let mut p = t.parameters.clone();
            if let Some(props) = t.parameters["properties"].as_object() {
                p["properties"] = Value::Object(props.iter().map(|(k, v)| (arg_of[k].clone(), v.clone())).collect());
            }
            if let Some(req) = t.parameters["required"].as_array() {
                p["required"] = json!(
                    req.iter()
                        .map(|r| arg_of.get(r.as_str().unwrap_or_default()).cloned().unwrap_or_default())
                        .collect::<Vec<_>>()
                );
            }
            ToolSpec {
                name: f.clone(),
                parameters: p,
                ..t.clone()
            }
        })
        .collect();
    let output: Vec<Call> = e
        .output
        .iter()
        .map(|c| match fun_of.get(&c.name) {
            Some(f) => {
                let arg_of = invert(mapping["arguments"][f].as_object().expect("object"));
                Call {
                    name: f.clone(),
                    arguments: c
                        .arguments
                        .iter()
                        .map(|(k, v)| (arg_of.get(k).cloned().unwrap_or_else(|| k.clone()), v.clone()))
                        .collect(),
                    label: c.label.clone(),
                }
            }
            None => c.clone(),
        })
        .collect();
    let mut row = variant_row(e, "obfuscate", "obfuscate", json!({"mapping": mapping}));
    row.tools = tools;
    row.output = output;
    row
}

/// Maps obfuscated calls back to the original names with the `mapping` of
/// [`obfuscation_mapping`]; calls of unknown names are returned unchanged.
pub fn deobfuscate(calls: &[Call], mapping: &Value) -> Vec<Call> {
    calls
        .iter()
        .map(|c| match mapping["functions"][&c.name].as_str() {
            Some(name) => Call {
                name: name.into(),
                arguments: c
                    .arguments
                    .iter()
                    .map(|(k, v)| {
                        (
                            mapping["arguments"][&c.name][k].as_str().unwrap_or(k).to_string(),
                            v.clone(),
                        )
                    })
                    .collect(),
                label: c.label.clone(),
            },
            None => c.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::variants::fixtures::example;

    #[test]
    fn obfuscation_round_trips() {
        let e = example();
        let o = obfuscate(&e);
        assert_eq!(o.tools[1].name, "FUNC_1");
        assert_eq!(o.output[0].name, "FUNC_1");
        assert_eq!(
            o.output[0].arguments,
            json!({"ARG_0": 1, "ARG_1": "q"}).as_object().unwrap().clone()
        );
        assert_eq!(o.tools[1].parameters["required"], json!(["ARG_0", "ARG_1"]));
        let m = &o.meta.as_ref().unwrap()["variant"]["mapping"];
        assert_eq!(deobfuscate(&o.output, m), e.output);
    }
}
