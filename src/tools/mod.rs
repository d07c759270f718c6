//! The tool layer: tool specifications (the catalog every emitter reads), calls, and the
//! executor that runs SLOT calls over Arrow record batches.
//!
//! - [`pool`]: the SLOT tool pool as data ([`ToolSpec`] with JSON Schema parameters).
//! - [`check`]: gold calls checked against their tools (JSON Schema validation, grounding of
//!   argument values in the request); used by the seq converters and the BFCL gold lint.
//! - [`mod@reference`]: the reference tool pool (recipe knob `tool_pool = "reference"`): the SLOT
//!   calls IBM's reference tools execute faithfully.
//! - [`table`]: the `initialize_active_data` join step (the only SQLite use) and SQLite → Arrow;
//!   [`join_cache`]: one materialised join per (database file, join SQL), shared, byte-bounded.
//! - [`executor`]: one function per tool, semantics in each doc comment.
//! - [`openapi`]: the OpenAPI 3.1 documents of REST endpoints and of the SLOT/SEL tool server
//!   (what `tools/openapi.json` holds and `toolforge serve` answers at `/openapi.json`);
//!   [`functions_json`]: the OpenAI function-calling format of a catalog.

pub mod check;
pub mod executor;
pub mod index;
pub mod join_cache;
pub mod lax;
pub mod names;
pub mod openapi;
pub mod pool;
pub mod reference;
pub mod rest;
pub mod sel;
pub mod shown;
pub mod spec_table;
pub mod table;
pub mod template;
pub mod toolkit;

pub use toolkit::Toolkit;

use serde::{Deserialize, Serialize};

/// One tool call of a gold sequence: `name(arguments) -> label`.
///
/// `arguments` is a JSON object; a string argument of the form `"$LABEL$"` refers to the output
/// of the earlier call labelled `LABEL` (Live API-Bench convention).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// Tool name, e.g. `filter_data`.
    pub name: String,
    /// Arguments as a JSON object.
    pub arguments: serde_json::Map<String, serde_json::Value>,
    /// The label under which the output is stored, e.g. `FILTERED_DF_0`.
    pub label: String,
}

/// A tool specification: the one catalog type every emitter and the server read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Function name.
    pub name: String,
    /// What the tool does, for the model (absent in a row's reference `{"name"}`: empty).
    #[serde(default)]
    pub description: String,
    /// JSON Schema (`type: object`) of the arguments (absent in a reference: null).
    #[serde(default)]
    pub parameters: serde_json::Value,
    /// JSON Schema of the output (`output_parameters` in Live API-Bench specs).
    #[serde(default)]
    pub output_parameters: serde_json::Value,
}

impl ToolSpec {
    /// A reference to the dataset catalog's tool of this name: `description` empty and
    /// `parameters` null. Seq datasets keep instance toolkits as references (one catalog, 100k+
    /// rows). The rows emitter writes a reference as `{"name": …}` (the spec is the catalog's,
    /// `tools/functions.json`; read back, `{"name"}` deserialises to a reference again); the
    /// trajectory emitter, `eval` and `retrieval` resolve it to the catalog's spec by name.
    pub fn reference(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::Value::Null,
            output_parameters: serde_json::Value::Null,
        }
    }

    /// Whether this is a [`ToolSpec::reference`].
    pub fn is_reference(&self) -> bool {
        self.parameters.is_null() && self.description.is_empty()
    }
}

/// The setup calls and the predicted calls of a row, accepting both row shapes. The setup calls,
/// in the order the framework runs them: the row's `initialization_step` when set (else
/// `output[0]` when it is the join step `initialize_active_data`: rows built before the setup
/// moved out of `output`), then its `additional_setup_steps` (the further joined tables that
/// subqueries and set operations read, labelled `starting_table_var_<n>`). Every reader of a
/// row's setup goes through this function.
pub fn setup_and_calls<'c>(
    initialization_step: Option<&'c Call>,
    additional_setup_steps: &'c [Call],
    output: &'c [Call],
) -> (Vec<&'c Call>, &'c [Call]) {
    let (first, calls) = match (initialization_step, output.first()) {
        (Some(s), _) => (Some(s), output),
        (None, Some(first)) if first.name == "initialize_active_data" => (Some(first), &output[1..]),
        _ => (None, output),
    };
    (first.into_iter().chain(additional_setup_steps).collect(), calls)
}

/// The sink calls of a sequence: those whose label no call of `calls` references (`$LABEL$`,
/// also inside array arguments), in call order — the calls whose outputs are the answer (Live
/// API-Bench App. D: the final answer is read from the last call(s) of each chain).
pub fn sink_calls(calls: &[Call]) -> Vec<&Call> {
    let referenced: Vec<&str> = calls
        .iter()
        .flat_map(|c| c.arguments.values())
        .flat_map(|v| match v {
            serde_json::Value::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        })
        .filter_map(as_label_ref)
        .collect();
    calls
        .iter()
        .filter(|c| !referenced.contains(&c.label.as_str()))
        .collect()
}

/// The `$LABEL$` reference a call argument uses for the output labelled `label`.
pub fn label_ref(label: &str) -> String {
    format!("${label}$")
}

/// If `value` is a `"$LABEL$"` reference, the label.
pub fn as_label_ref(value: &serde_json::Value) -> Option<&str> {
    let s = value.as_str()?;
    s.strip_prefix('$')?.strip_suffix('$').filter(|l| !l.is_empty())
}

/// OpenAI function-calling format of a catalog: `[{"type": "function", "function": {"name",
/// "description", "parameters"}}]` (what `tools/functions.json` holds).
pub fn functions_json(catalog: &[ToolSpec]) -> serde_json::Value {
    serde_json::json!(
        catalog
            .iter()
            .map(|t| serde_json::json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect::<Vec<_>>()
    )
}

/// A tool spec for tests: `name`, a description naming it, no parameters.
#[cfg(test)]
pub(crate) fn test_spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} does it"),
        parameters: serde_json::json!({"type": "object", "properties": {}}),
        output_parameters: serde_json::Value::Null,
    }
}
