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
pub mod table;
pub mod template;

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

/// A row's toolkit: its tool specs, shared. Rows whose toolkits are the same list (the SLOT/SEL
/// rows of one join signature, 61 SEL specs each) hold one allocation, so cloning a row or its
/// toolkit copies a pointer and the emitters serialise a toolkit once ([`Toolkit::id`] is the
/// memo key). Serialised exactly as the list of specs (a JSON array); reads (`iter`, `len`,
/// indexing) go through `Deref` to the `Vec`, and a write (`push`, `tools[0].name = …`) copies
/// the list first when it is shared (`Arc::make_mut`), so no other row sees it.
///
/// A toolkit's compact JSON text is computed once per shared list, by whichever of the store
/// entry, the trajectories key and the rows emitter asks first ([`Toolkit::json`]); a write clears
/// it.
#[derive(Debug, Clone, Default)]
pub struct Toolkit(std::sync::Arc<Specs>);

#[derive(Debug, Clone, Default)]
struct Specs {
    list: Vec<ToolSpec>,
    json: std::sync::OnceLock<std::sync::Arc<str>>,
}

impl PartialEq for Toolkit {
    fn eq(&self, other: &Toolkit) -> bool {
        self.0.list == other.0.list
    }
}

impl Toolkit {
    /// The address of the shared list: equal for two toolkits that share it (then their specs are
    /// equal); a memo key valid while either toolkit is alive.
    pub fn id(&self) -> usize {
        std::sync::Arc::as_ptr(&self.0) as usize
    }

    /// The specs as compact JSON (what `serde_json::to_string` gives), computed once per shared
    /// list.
    pub fn json(&self) -> &std::sync::Arc<str> {
        self.0
            .json
            .get_or_init(|| serde_json::to_string(&self.0.list).expect("serialisable").into())
    }
}

impl From<Vec<ToolSpec>> for Toolkit {
    fn from(list: Vec<ToolSpec>) -> Toolkit {
        Toolkit(std::sync::Arc::new(Specs {
            list,
            json: Default::default(),
        }))
    }
}

impl FromIterator<ToolSpec> for Toolkit {
    fn from_iter<I: IntoIterator<Item = ToolSpec>>(iter: I) -> Toolkit {
        Toolkit::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl std::ops::Deref for Toolkit {
    type Target = Vec<ToolSpec>;
    fn deref(&self) -> &Vec<ToolSpec> {
        &self.0.list
    }
}

impl std::ops::DerefMut for Toolkit {
    fn deref_mut(&mut self) -> &mut Vec<ToolSpec> {
        let specs = std::sync::Arc::make_mut(&mut self.0);
        specs.json = Default::default();
        &mut specs.list
    }
}

impl<'a> IntoIterator for &'a Toolkit {
    type Item = &'a ToolSpec;
    type IntoIter = std::slice::Iter<'a, ToolSpec>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.list.iter()
    }
}

impl Serialize for Toolkit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.list.as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Toolkit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Toolkit, D::Error> {
        Vec::<ToolSpec>::deserialize(d).map(Toolkit::from)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ToolSpec {
        test_spec(name)
    }

    #[test]
    fn a_cloned_toolkit_shares_its_specs_and_a_write_copies_them() {
        let a = Toolkit::from(vec![spec("get_a"), spec("get_b")]);
        let mut b = a.clone();
        assert_eq!(a.id(), b.id(), "a clone shares the list");
        b[0].name = "get_c".into();
        assert_ne!(a.id(), b.id(), "a write copies a shared list");
        assert_eq!(a[0].name, "get_a", "the other row's toolkit is untouched");
        assert_eq!(b[0].name, "get_c");
    }

    #[test]
    fn a_toolkit_serialises_as_the_list_of_its_specs() {
        let specs = vec![spec("get_a"), spec("get_b")];
        let text = serde_json::to_string(&Toolkit::from(specs.clone())).unwrap();
        assert_eq!(text, serde_json::to_string(&specs).unwrap());
        let back: Toolkit = serde_json::from_str(&text).unwrap();
        assert_eq!(back.as_slice(), specs.as_slice());
    }

    #[test]
    fn a_toolkit_json_is_its_serialisation_shared_and_a_write_renews_it() {
        let a = Toolkit::from(vec![spec("get_a")]);
        let shared = a.clone();
        assert_eq!(&**a.json(), serde_json::to_string(&a).unwrap());
        assert!(
            std::sync::Arc::ptr_eq(a.json(), shared.json()),
            "computed once per shared list"
        );
        let mut written = shared.clone();
        written.push(spec("get_b"));
        assert_eq!(&**written.json(), serde_json::to_string(&written).unwrap());
        assert_eq!(
            &**a.json(),
            serde_json::to_string(&a).unwrap(),
            "the other rows keep theirs"
        );
    }
}
