//! Test fixtures of the toolkit variant operators: a tool with typed parameters, and an example
//! whose toolkit has four tools and whose gold calls `get_b`.

use serde_json::{Map, Value, json};

use crate::dataset::Example;
use crate::tools::{Call, ToolSpec};

/// A tool `name` whose parameters (all required) have the given JSON Schema types.
pub(crate) fn tool(name: &str, params: &[(&str, &str)]) -> ToolSpec {
    let props: Map<String, Value> = params
        .iter()
        .map(|(n, t)| (n.to_string(), json!({"type": t})))
        .collect();
    ToolSpec {
        name: name.into(),
        description: format!("Get the {name}"),
        parameters: json!({"type": "object", "properties": props, "required": params.iter().map(|p| p.0).collect::<Vec<_>>()}),
        output_parameters: json!({}),
    }
}

/// Example `d/1`: toolkit `get_a(x)`, `get_b(y, z)`, `get_c`, `get_d`; gold `get_b(y=1, z="q")`.
pub(crate) fn example() -> Example {
    Example {
        id: "d/1".into(),
        tools: vec![
            tool("get_a", &[("x", "string")]),
            tool("get_b", &[("y", "integer"), ("z", "string")]),
            tool("get_c", &[]),
            tool("get_d", &[]),
        ]
        .into(),
        output: vec![Call {
            name: "get_b".into(),
            arguments: json!({"y": 1, "z": "q"}).as_object().unwrap().clone(),
            label: "L".into(),
        }],
        ..Example::default()
    }
}
