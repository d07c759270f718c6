//! What a trajectory shows the model besides the conversation: the system prompt (the database
//! and the active tables the setup steps loaded, instead of the setup calls themselves) and the
//! `tools` list (the example's toolkit as OpenAI functions, without the setup step).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;

use crate::dataset::Example;
use crate::tools::{Call, ToolSpec, Toolkit};

/// The active table as the system prompt states it: the joined tables and how, its columns and
/// row count; a further setup step's table (`first` false) is stated as another loaded table
/// under its own label.
pub(super) fn active_table(setup: &Call, table: &Json, first: bool) -> String {
    let tables: Vec<String> = setup.arguments["alias_to_table_dict"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, t)| {
            t["original_table_name"]
                .as_str()
                .or(t.as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let joins: Vec<String> = setup.arguments["condition_sequence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| Some(format!("{} = {}", c[0].as_str()?, c[1].as_str()?)))
        .collect();
    let columns: Vec<&str> = table["columns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    format!(
        "{} \"${}$\": {}{} ({} rows) with columns {}.",
        if first {
            "The active table is already loaded as"
        } else {
            "Another table is loaded as"
        },
        setup.label,
        if tables.len() == 1 {
            format!("table {}", tables[0])
        } else {
            format!("the join of {}", tables.join(", "))
        },
        if joins.is_empty() {
            String::new()
        } else {
            format!(" on {}", joins.join(" and "))
        },
        table["total_rows"],
        columns.join(", ")
    )
}

pub(super) fn system_prompt(e: &Example, active: Option<&str>) -> String {
    let db = e.db_id.as_deref().unwrap_or("the");
    match active {
        None => format!(
            "You answer questions about the `{db}` database by calling its REST API functions. Call the function that answers the question with the values the question gives, then reply with one sentence stating the answer."
        ),
        Some(active) => format!(
            "You answer questions about the `{db}` database by calling tools. {active} Each tool result is stored under the label shown in the result; refer to an earlier result in a later call as \"$LABEL$\". When the last result answers the question, reply with one sentence stating the answer."
        ),
    }
}

/// The request as the user turn states it: the question, and BIRD's evidence as `Hint: …`.
pub(crate) fn request_text(e: &Example) -> String {
    match &e.evidence {
        Some(ev) if !ev.is_empty() => format!("{}\nHint: {ev}", e.input),
        _ => e.input.clone(),
    }
}

/// The first user turn: [`request_text`], then (SLOT/SEL) the active tables the setup steps
/// loaded, as the system prompt states them. Nothing a trajectory needs is only in the system
/// prompt, which Mistral-family chat templates drop (issue 29). Layout: `<request>\n\n<active>`.
pub(crate) fn user_turn(e: &Example, active: Option<&str>) -> String {
    match active {
        Some(active) => format!("{}\n\n{active}", request_text(e)),
        None => request_text(e),
    }
}

/// One entry of a trajectory's `tools`: an OpenAI function (`{"type": "function", "function":
/// {"name", "description", "parameters"}}`), serialised from the spec in place.
#[derive(serde::Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionBody<'a>,
}

#[derive(serde::Serialize)]
struct FunctionBody<'a> {
    name: &'a str,
    description: &'a str,
    /// [`super::schema::shown_parameters`] of the spec's.
    parameters: Json,
}

/// The `tools` of the trajectories as JSON text, each toolkit serialised once: a build's rows
/// share a handful of toolkits (one per join signature for SLOT/SEL, one per database for REST),
/// and serialising 61 SEL specs per row was a fifth of a sel-spider build (issue 17).
pub(super) struct ToolsText<'b> {
    /// The dataset catalog by name: resolves [`ToolSpec::reference`]s.
    pub catalog: HashMap<&'b str, &'b ToolSpec>,
    /// By [`crate::tools::Toolkit::id`]; the entry keeps the toolkit alive, so its id stays its own.
    memo: Mutex<HashMap<usize, (Toolkit, Arc<str>)>>,
}

impl<'b> ToolsText<'b> {
    /// The texts of the toolkits of a build whose catalog is `catalog`.
    pub fn new(catalog: &'b [ToolSpec]) -> ToolsText<'b> {
        ToolsText {
            catalog: catalog.iter().map(|t| (t.name.as_str(), t)).collect(),
            memo: Mutex::new(HashMap::new()),
        }
    }

    /// `e`'s toolkit with references resolved through the catalog, without the setup step, as
    /// a JSON array of OpenAI functions.
    pub fn of(&self, e: &Example) -> Arc<str> {
        if let Some((_, text)) = self.memo.lock().expect("tools memo").get(&e.tools.id()) {
            return text.clone();
        }
        let text: Arc<str> = tools_json(&e.tools, &self.catalog).into();
        self.memo
            .lock()
            .expect("tools memo")
            .insert(e.tools.id(), (e.tools.clone(), text.clone()));
        text
    }
}

/// `toolkit` (references resolved through `catalog`, the setup step left out) as the JSON text
/// of the trajectories' `tools`: OpenAI functions, parameters in [`super::schema`]'s form.
pub(crate) fn tools_json(toolkit: &[ToolSpec], catalog: &HashMap<&str, &ToolSpec>) -> String {
    let tools: Vec<FunctionTool> = toolkit
        .iter()
        .map(|t| match catalog.get(t.name.as_str()) {
            Some(s) if t.is_reference() => *s,
            _ => t,
        })
        .filter(|spec| spec.name != "initialize_active_data")
        .map(|spec| FunctionTool {
            kind: "function",
            function: FunctionBody {
                name: &spec.name,
                description: &spec.description,
                parameters: super::schema::shown_parameters(&spec.parameters),
            },
        })
        .collect();
    serde_json::to_string(&tools).expect("serialisable")
}
