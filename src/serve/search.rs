//! The tools the server lists over MCP ([`listing`]: names, input schemas, what each runs) and
//! `search_tools` over them (issue 32): a BM25 index ([`crate::retrieval::ToolIndex`]) built on
//! first use from the listing, so a hit's name is the name `tools/call` (and `call_tool`)
//! accepts and its `parameters` the input schema the call is checked against.
//!
//! `search_tools` takes ToolGym's arguments (their meta-MCP server,
//! `tool_retrieval_index/server.py`): `query` (required) and `top_k` (default 5, 1–20); their
//! `min_score` is a cosine threshold with no BM25 counterpart and is not offered. The answer is
//! `{"query", "tools": [{"name", "score", "description", "parameters"}]}`, best first.
//!
//! **Open world** (`--open-world`, ToolGym's setting): `tools/list` shows only `search_tools`,
//! `call_tool` (`{"name", "arguments"}`: runs any tool of the catalog, for clients that can only
//! call listed tools) and, for SLOT/SEL, `create_session`; `tools/call` still routes every tool
//! of the catalog by name.

use std::sync::Arc;

use serde_json::{Map, Value as Json, json};

use super::state::{AppState, Toolkit};
use crate::retrieval::ToolIndex;
use crate::tools::ToolSpec;
use crate::variants::drift::ToolDrift;

/// What a listed tool runs.
#[derive(Clone)]
pub(crate) enum Runs {
    /// A REST endpoint (index into [`Toolkit::endpoints`]).
    Endpoint(usize),
    /// A REST endpoint under schema drift: called with its A_new arguments.
    DriftedEndpoint(usize, Arc<ToolDrift>),
    /// A SLOT/SEL tool in a session.
    Tool(String),
}

/// One tool as MCP lists it.
pub(crate) struct Listed {
    /// The listed spec: its name is the MCP tool name, its parameters the input schema.
    pub(crate) spec: ToolSpec,
    /// What a call runs.
    pub(crate) runs: Runs,
}

/// The catalog as MCP lists it: REST endpoints (A_new under drift; a name shared by several
/// databases qualified `<db_id>__<name>`), or SLOT/SEL tools with `session_id` (required) and
/// `label` added to their parameters.
pub(crate) fn listing(tk: &Toolkit) -> Vec<Listed> {
    if tk.format == "rest" {
        let listed: Vec<(ToolSpec, Runs)> = tk
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, ep)| {
                let drift = tk.drift.as_ref().and_then(|d| d.by_old_name(Some(&ep.db_id), &ep.name));
                match drift {
                    Some(d) => (d.new.clone(), Runs::DriftedEndpoint(i, Arc::new(d.clone()))),
                    None => (ep.tool_spec(), Runs::Endpoint(i)),
                }
            })
            .collect();
        let mut count: std::collections::HashMap<String, usize> = Default::default();
        for (spec, _) in &listed {
            *count.entry(spec.name.clone()).or_default() += 1;
        }
        return listed
            .into_iter()
            .enumerate()
            .map(|(i, (mut spec, runs))| {
                if count[&spec.name] > 1 {
                    spec.name = crate::tools::names::qualified_name(&tk.endpoints[i].db_id, &spec.name);
                }
                Listed { spec, runs }
            })
            .collect();
    }
    tk.catalog
        .iter()
        .map(|t| {
            let mut spec = t.clone();
            if let Some(props) = spec.parameters["properties"].as_object_mut() {
                props.insert(
                    "session_id".into(),
                    json!({"type": "string", "description": "The session from create_session."}),
                );
                props.insert(
                    "label".into(),
                    json!({"type": "string", "description": "Label for the output; later calls refer to it as $label$."}),
                );
            }
            if let Some(req) = spec.parameters["required"].as_array_mut() {
                req.push(json!("session_id"));
            }
            Listed {
                runs: Runs::Tool(t.name.clone()),
                spec,
            }
        })
        .collect()
}

/// Most tools one `search_tools` call returns (ToolGym's maximum).
pub const MAX_TOP_K: u64 = 20;

/// The `search_tools` tool.
pub(crate) fn search_tools_spec() -> ToolSpec {
    ToolSpec {
        name: "search_tools".into(),
        description: "Search the catalog's tools (BM25 over names, descriptions and parameters). \
            Describe ONE capability per query; call again for another. Returns the best tools with \
            their full input schemas and scores; call a tool by its name (or through call_tool)."
            .into(),
        parameters: json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "What the tool should do, in words (e.g. 'number of singers by country')."},
            "top_k": {"type": "integer", "description": "Number of tools to return (default 5, max 20).", "default": 5, "minimum": 1, "maximum": MAX_TOP_K}
        }, "required": ["query"]}),
        output_parameters: json!({}),
    }
}

/// The `call_tool` tool of the open-world listing.
pub(crate) fn call_tool_spec() -> ToolSpec {
    ToolSpec {
        name: "call_tool".into(),
        description: "Call any tool of the catalog by name (find it with search_tools first).".into(),
        parameters: json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "The tool's name as search_tools returned it."},
            "arguments": {"type": "object", "description": "The tool's arguments, as its input schema describes them."}
        }, "required": ["name"]}),
        output_parameters: json!({}),
    }
}

/// The index over [`listing`], built on first use.
fn index(state: &AppState) -> &ToolIndex {
    state
        .search_index
        .get_or_init(|| ToolIndex::build(listing(&state.toolkit).into_iter().map(|l| l.spec).collect()))
}

/// The `query` and `top_k` of a `search_tools` call (`top_k` default 5, 1–[`MAX_TOP_K`], a
/// number or its text); `Err` names the invalid argument. `eval run --open-world` checks the
/// model's arguments with it too.
pub(crate) fn search_arguments(args: &Map<String, Json>) -> Result<(String, usize), String> {
    let query = match args.get("query") {
        Some(Json::String(q)) if !q.trim().is_empty() => q.clone(),
        Some(Json::String(_)) => return Err("query: must not be empty".into()),
        Some(_) => return Err("query: must be a string".into()),
        None => return Err("query: field required".into()),
    };
    let top_k = match args.get("top_k") {
        None | Some(Json::Null) => 5,
        Some(v) => match v.as_u64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok())) {
            Some(k) if (1..=MAX_TOP_K).contains(&k) => k,
            _ => return Err(format!("top_k: must be an integer from 1 to {MAX_TOP_K}")),
        },
    };
    Ok((query, top_k as usize))
}

/// Runs `search_tools` with `args` (`query`, `top_k`); `Err` is the message of an invalid
/// argument (a 422 over HTTP, a tool error over MCP).
pub(crate) fn search_tools(state: &AppState, args: &Map<String, Json>) -> Result<Json, String> {
    let (query, top_k) = search_arguments(args)?;
    let tools = crate::retrieval::cli::hits_json(index(state), &query, top_k);
    Ok(json!({"query": query, "tools": tools}))
}
