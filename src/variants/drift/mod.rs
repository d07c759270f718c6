//! `drift`: DynamicToolBench schema drift, A_new = T(A_old), over [`ToolSpec`] JSON Schemas, with
//! a migration of every gold call from A_old to A_new and the reverse un-migration the executor
//! (and `toolforge serve`) uses, so a migrated call executes to the same answer.
//!
//! The six operators ([`OPERATORS`]), one file each (its proposal, schema change, migration and
//! un-migration), each recorded as a [`Change`] in the tool's change log:
//!
//! | operator             | schema change (A_old → A_new)                                   | migration of a gold call                    |
//! |----------------------|-----------------------------------------------------------------|---------------------------------------------|
//! | `endpoint_evolution` | function `f` → `f_v2`; REST path `/v1/…` → `/v2/…`              | call name → `f_v2`                          |
//! | `parameter_rename`   | property renamed through [`SYNONYMS`] (token-wise), else snake_case → camelCase | argument key renamed          |
//! | `type_drift`         | `integer` / `number` / `boolean` property → `string` (default too) | value written as text (`-1` → `"-1"`)    |
//! | `required_swap`      | an optional property with a default becomes required, or a required one stating a default becomes optional (never a required input without a default) | optional→required: the old default made explicit when absent |
//! | `default_flip`       | a boolean default `d` becomes `!d`; an enum default the next choice (REST `sort_order`) | the old default made explicit when absent |
//! | `nested_object`      | related properties ([`GROUPS`]; REST: the filter parameters as `criteria`) moved into one object property; REST: verb evolution GET → POST with a JSON body | those arguments moved into the object |
//!
//! Each parameter gets at most one of `type_drift`, `required_swap`, `default_flip`; renaming and
//! nesting compose with them. Every drifted A_new schema has `additionalProperties: false` (a
//! strict new version: an old argument name is an error, FastAPI's `extra_forbidden`).
//! Un-migration ([`unmigrate`]) inverts the migration and gives omitted A_new arguments their
//! A_new meaning (a flipped default is filled with the *new* default).
//!
//! Which changes break an old call ([`Migrated::loud`]): all but `default_flip` and
//! `required→optional`, which leave an old call valid under A_new (a flipped default silently
//! changes its meaning; that is why the migration makes it explicit).
//!
//! The dataset's drift ([`Drift`], `tools/drift.json`) holds, per tool, A_old, A_new and the
//! change log; `toolforge serve` enforces A_new with it ([`Drift::check_body`],
//! [`Drift::check_query`]), answering old-style calls with FastAPI-shaped 422 errors.
//!
//! Files: [`plan`] draws a tool's change log ([`plan_tool`]) and the dataset's [`Drift`], applies
//! it to a schema ([`apply_schema`]) and makes the variant rows; [`migrate`](mod@migrate) rewrites gold calls
//! A_old → A_new and back ([`migrate()`], [`unmigrate`]); [`validate`] is the A_new validator
//! `serve` uses ([`fastapi_errors`], [`Drift::check_body`], [`Drift::check_query`],
//! [`Drift::check_json`]); [`openapi`](mod@openapi) writes the A_new OpenAPI document of a REST dataset.

pub mod default_flip;
pub mod endpoint_evolution;
pub mod migrate;
pub mod nested_object;
pub mod openapi;
pub mod parameter_rename;
pub mod plan;
pub mod required_swap;
pub mod type_drift;
pub mod validate;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{DriftConfig, Rng};
use crate::tools::ToolSpec;

pub use migrate::{Migrated, migrate, unmigrate};
pub use nested_object::GROUPS;
pub use openapi::a_new_document;
pub use parameter_rename::{SYNONYMS, renamed};
pub use plan::{apply_schema, plan_instance, plan_tool};
pub use validate::fastapi_errors;

/// The six DynamicToolBench drift operators, one file each (defined with the recipe's
/// `[variants.drift]` section it validates).
pub use crate::recipe::variants::DRIFT_OPERATORS as OPERATORS;

/// One entry of a tool's change log. Parameter names are A_old names except in
/// [`Change::NestedObject`], whose members are named as in A_new (after renaming).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "operator", rename_all = "snake_case")]
pub enum Change {
    /// `endpoint_evolution`: the function (and REST path) got a new version.
    EndpointEvolution {
        /// A_old function name.
        name_old: String,
        /// A_new function name.
        name_new: String,
        /// REST: A_old path.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        path_old: Option<String>,
        /// REST: A_new path.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        path_new: Option<String>,
    },
    /// `parameter_rename`.
    ParameterRename {
        /// A_old name.
        from: String,
        /// A_new name.
        to: String,
    },
    /// `type_drift`: the parameter's type became `string`.
    TypeDrift {
        /// A_old name.
        parameter: String,
        /// A_old type (`integer`, `number`, `boolean`).
        from: String,
    },
    /// `required_swap`.
    RequiredSwap {
        /// A_old name.
        parameter: String,
        /// `true`: optional → required (the A_old default is made explicit); `false`: required
        /// → optional.
        now_required: bool,
        /// The default the schema states (optional → required: made explicit by the migration;
        /// required → optional: A_new keeps it and un-migration fills it in).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        default: Option<Value>,
    },
    /// `default_flip`: a boolean default negated, or an enum default moved to the next choice.
    DefaultFlip {
        /// A_old name.
        parameter: String,
        /// A_old default.
        old: Value,
        /// A_new default.
        new: Value,
    },
    /// `nested_object`: members moved into one object property.
    NestedObject {
        /// The object property.
        group: String,
        /// Members, A_new names, in A_old order.
        members: Vec<String>,
    },
}

impl Change {
    /// The operator name ([`OPERATORS`]).
    pub fn operator(&self) -> &'static str {
        match self {
            Change::EndpointEvolution { .. } => "endpoint_evolution",
            Change::ParameterRename { .. } => "parameter_rename",
            Change::TypeDrift { .. } => "type_drift",
            Change::RequiredSwap { .. } => "required_swap",
            Change::DefaultFlip { .. } => "default_flip",
            Change::NestedObject { .. } => "nested_object",
        }
    }
}

/// One drifted tool: A_old, A_new and the change log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDrift {
    /// REST: the endpoint's database (function names are unique per database only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub db_id: Option<String>,
    /// REST: A_old route path.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_old: Option<String>,
    /// REST: A_new route path.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_new: Option<String>,
    /// REST: A_new HTTP method — `POST` (arguments as a JSON body, validated against
    /// `new.parameters`) when a `nested_object` change grouped parameters into an object (verb
    /// evolution: a query string is flat), else `GET` (A_old is always `GET`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub method: Option<String>,
    /// A_old (the spec a model is shown).
    pub old: ToolSpec,
    /// A_new (what execution enforces).
    pub new: ToolSpec,
    /// The change log.
    pub changes: Vec<Change>,
}

impl ToolDrift {
    /// A SLOT/SEL tool drifted by `changes` (no REST route): A_new is `old` with the changes
    /// applied ([`plan::apply_schema`]).
    pub fn of_tool(old: &ToolSpec, changes: Vec<Change>) -> ToolDrift {
        ToolDrift {
            db_id: None,
            path_old: None,
            path_new: None,
            method: None,
            new: plan::apply_schema(old, &changes),
            old: old.clone(),
            changes,
        }
    }

    /// Whether the A_new endpoint takes a JSON body (`POST`, verb evolution; REST only).
    pub fn is_post(&self) -> bool {
        self.method.as_deref() == Some("POST")
    }

    /// The A_new name of the A_old parameter `old` (renamed through the change log).
    pub fn new_parameter_name(&self, old: &str) -> String {
        self.changes
            .iter()
            .find_map(|c| match c {
                Change::ParameterRename { from, to } if from == old => Some(to.clone()),
                _ => None,
            })
            .unwrap_or_else(|| old.to_string())
    }

    /// Errors the A_old endpoint reported on an un-migrated call (`loc` `[where, old name]`),
    /// renamed to the A_new parameter names the caller used.
    pub fn errors_in_new_names(&self, errors: Vec<Value>) -> Vec<Value> {
        errors
            .into_iter()
            .map(|mut e| {
                if let Some(name) = e["loc"][1].as_str().map(|n| self.new_parameter_name(n)) {
                    e["loc"][1] = json!(name);
                }
                e
            })
            .collect()
    }
}

/// What one draw of the drift covers ([`Drift::scope`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One A_new per tool of the dataset catalog, shared by every row (REST: per endpoint — an
    /// endpoint's A_new is its route, and REST calls have no session to carry an instance).
    #[default]
    Tool,
    /// One A_new per instance (SLOT/SEL): each drift row draws its toolkit's changes from its
    /// own stream (recipe seed, `drift`, parent id, tool name); the row carries them in
    /// `meta.variant` (`changes`, `tools_new`), and `serve` enforces them in sessions opened for
    /// that row's id ([`Drift::of_instance`]).
    Instance,
}

/// The drift of a whole dataset: `tools/drift.json`, and what `toolforge serve` enforces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Dataset format (`slot`, `sel`, `rest`).
    pub format: String,
    /// The seed the drift was drawn with.
    pub seed: u64,
    /// Per tool (REST) or per instance (SLOT/SEL); absent in files written before per-instance
    /// drift (then `tool`).
    #[serde(default)]
    pub scope: Scope,
    /// Every drifted tool of the dataset catalog (REST: every endpoint, with its database);
    /// empty for scope `instance` (each drift row carries its own), except in
    /// [`Drift::of_instance`], where it holds that instance's tools.
    pub tools: Vec<ToolDrift>,
}

/// The properties of a JSON Schema object, in order.
fn props(schema: &Value) -> Vec<(String, Value)> {
    schema["properties"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// The `required` names of a JSON Schema object.
fn required(schema: &Value) -> Vec<String> {
    schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Each element with probability 1/2, at least one (empty in, empty out).
fn pick_some<T: Clone>(items: &[T], rng: &mut Rng) -> Vec<T> {
    if items.is_empty() {
        return vec![];
    }
    let mut out: Vec<T> = items.iter().filter(|_| rng.chance(0.5)).cloned().collect();
    if out.is_empty() {
        out.push(items[rng.below(items.len())].clone());
    }
    out
}

#[cfg(test)]
mod tests;
