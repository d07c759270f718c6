//! MCP tool definitions: ingest, normalise, deduplicate.
//!
//! Every `*.json` / `*.jsonl` file under the source root is read (sorted by path). A file holds
//! one record (an object), an array of records, `{"servers": [records]}`, or one record per line
//! (`.jsonl`). The shape is detected per record:
//!
//! - **LiveMCPBench** (`icip-cas/LiveMCPBench` `tools.json`): `{name, description, web, config,
//!   category, tools: {<server key>: {server_name, version, tools: [tool]}}}` (`tools` may also be
//!   a plain array);
//! - **Smithery** server metadata: `{qualifiedName, displayName, description, homepage?, tools: [tool]}`;
//! - **MCP `tools/list` result** (JSON-RPC): `{"jsonrpc": "2.0", "id": .., "result": {"tools": [tool]}}`;
//!   the server is named after the file stem (plus `#<id>` when a file holds several);
//! - **server snapshot** (ToolGym's Smithery dumps): `{server_info: {qualifiedName | name |
//!   server_name, displayName?, description?, homepage?}, tools: [tool]}` (named after the file
//!   stem when `server_info` names no server).
//!
//! A tool is `{name, description?, inputSchema, annotations?}` (MCP spec). A record of no known
//! shape is a [`BadRecord`] (file, 0-based record index or line, what was expected) and skipped;
//! so is a whole file that cannot be read or is not JSON (one bad record, index 0): one broken
//! file in a dump directory never stops the build.
//! A tool that cannot be used is *rejected* with a reason code: `missing_name`,
//! `missing_input_schema`, `schema_not_object` (inputSchema is not a JSON object),
//! `top_level_not_object` (`type` other than `object`), `invalid_schema` (meta-schema or compile
//! failure after normalisation, see [`super::schema`]).
//!
//! Deduplication is by content: two tools are one when they have the same name
//! (case-sensitive), the same normalised schema ([`schema::canonical`]) *and* the same
//! description, whichever server lists them — the same server in two registry dumps, or copies
//! of one server published under several names (ToolGym's Smithery dump lists
//! `get_pull_request_comments` on three GitHub servers). The first occurrence (file order) is
//! kept and the other servers are recorded as its [`McpTool::aliases`]; each merge is a
//! [`Duplicate`]. Tools that differ in any of the three are all kept, each with its own
//! description.
//!
//! Names ([`names::assign_functions`]): a tool's OpenAI name is its sanitised name unless an
//! *earlier* different tool (input order: files sorted by path, records and tools in file order)
//! already holds that name, compared case-insensitively since `whoAmI` and `whoami` are one name
//! to many consumers; then it is `<server>__<name>` (`_2`, `_3`, … when that still collides; a
//! `name_qualified` fix). So a tool's name depends only on the tools before it: adding a dump
//! whose files sort after the existing ones renames nothing, and a copy of a tool (merged)
//! never forces a qualification.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::schema::{self, Fix};
use crate::corpus::{BadRecord, CorpusError};

/// An MCP server as described by its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// Server name (LiveMCPBench `name`, Smithery `qualifiedName`, tools/list: file stem).
    pub name: String,
    /// Display name when it differs (Smithery `displayName`).
    pub display_name: Option<String>,
    /// Description.
    pub description: String,
    /// Home page (LiveMCPBench `web`, Smithery `homepage`).
    pub homepage: Option<String>,
    /// Category (LiveMCPBench).
    pub category: Option<String>,
    /// Input shape: `livemcpbench`, `smithery`, `snapshot` or `tools_list`.
    pub shape: String,
    /// `<file>#<record>` the server came from.
    pub origin: String,
}

/// A tool as read, before normalisation.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTool {
    /// Server name.
    pub server: String,
    /// `<file>#<record>` of the server record.
    pub origin: String,
    /// The tool object as found.
    pub value: Value,
}

/// A tool of the emitted catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpTool {
    /// OpenAI function name (`^[a-zA-Z0-9_-]{1,64}$`, unique in the catalog).
    pub function: String,
    /// The tool's name as the server declares it.
    pub name: String,
    /// The server offering it.
    pub server: String,
    /// Description (may be empty; some are Chinese in LiveMCPBench).
    pub description: String,
    /// The normalised input schema.
    pub input_schema: Value,
    /// MCP tool annotations, as found (`null` when absent).
    pub annotations: Value,
    /// Normalisation fixes applied (including `name_sanitised`).
    pub fixes: Vec<Fix>,
    /// Other servers listing the same tool (same name, schema and description), in input order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

/// A content-identical tool merged into an earlier one (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    /// Server of the duplicate.
    pub server: String,
    /// Server of the kept tool (the same server when one server is listed twice).
    pub kept_server: String,
    /// Tool name.
    pub tool: String,
    /// `<file>#<record>` of the kept tool's server record.
    pub kept_from: String,
    /// `<file>#<record>` of the duplicate's server record.
    pub duplicate_from: String,
}

/// A tool that was not kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    /// Server name.
    pub server: String,
    /// Tool name (`""` when missing).
    pub tool: String,
    /// Reason code (see the module doc).
    pub reason: String,
    /// Detail (the validator's message).
    pub detail: String,
}

/// What ingesting a source directory produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ingested {
    /// Servers in file order.
    pub servers: Vec<Server>,
    /// Kept, deduplicated tools in file order.
    pub tools: Vec<McpTool>,
    /// Tools read (before rejection and deduplication).
    pub tools_in: usize,
    /// Rejected tools.
    pub rejected: Vec<Rejected>,
    /// Content-identical tools merged (see the module doc).
    pub duplicates: Vec<Duplicate>,
    /// Skipped records.
    pub bad_records: Vec<BadRecord>,
}

mod names;
mod registry;

use names::assign_functions;
pub use names::sanitise_name;
use registry::file_records;
pub use registry::{inputs, parse_record};

/// Reads every file, normalises and validates each tool, deduplicates. `root` is used to name
/// files relative to the source root in bad records and origins.
pub fn ingest(files: &[PathBuf], root: &Path) -> Result<Ingested, CorpusError> {
    let mut out = Ingested::default();
    let mut raw: Vec<RawTool> = Vec::new();
    for path in files {
        let rel = path.strip_prefix(root).unwrap_or(path).display().to_string();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A file that cannot be read or is not JSON is one bad record, never an abort.
        let records = match file_records(path) {
            Ok(r) => r,
            Err(e) => {
                out.bad_records.push(BadRecord {
                    file: rel.clone(),
                    record: 0,
                    message: e.to_string(),
                });
                continue;
            }
        };
        let several = records.len() > 1;
        for (i, rec) in records {
            let parsed = rec.and_then(|r| parse_record(&r, &stem, &format!("{rel}#{i}"), several));
            match parsed {
                Ok((server, tools)) => {
                    raw.extend(tools.into_iter().map(|value| RawTool {
                        server: server.name.clone(),
                        origin: server.origin.clone(),
                        value,
                    }));
                    out.servers.push(server);
                }
                Err(message) => out.bad_records.push(BadRecord {
                    file: rel.clone(),
                    record: i,
                    message,
                }),
            }
        }
    }
    out.tools_in = raw.len();
    // normalise + validate
    let mut kept: Vec<McpTool> = Vec::new();
    let mut origins: Vec<String> = Vec::new();
    let mut seen: HashMap<(String, String, String), usize> = HashMap::new();
    for t in raw {
        match normalise_tool(&t) {
            Err(r) => out.rejected.push(r),
            Ok(tool) => {
                let key = (
                    tool.name.clone(),
                    schema::canonical(&tool.input_schema),
                    tool.description.clone(),
                );
                match seen.get(&key) {
                    Some(&i) => {
                        let kept_tool = &mut kept[i];
                        if tool.server != kept_tool.server && !kept_tool.aliases.contains(&tool.server) {
                            kept_tool.aliases.push(tool.server.clone());
                        }
                        out.duplicates.push(Duplicate {
                            server: tool.server,
                            kept_server: kept_tool.server.clone(),
                            tool: tool.name,
                            kept_from: origins[i].clone(),
                            duplicate_from: t.origin.clone(),
                        })
                    }
                    None => {
                        seen.insert(key, kept.len());
                        origins.push(t.origin.clone());
                        kept.push(tool);
                    }
                }
            }
        }
    }
    assign_functions(&mut kept);
    out.tools = kept;
    Ok(out)
}

/// Normalises one tool; `Err` is the rejection.
pub fn normalise_tool(t: &RawTool) -> Result<McpTool, Rejected> {
    let name = t.value.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let reject = |reason: &str, detail: String| Rejected {
        server: t.server.clone(),
        tool: name.clone(),
        reason: reason.into(),
        detail,
    };
    if !t.value.is_object() {
        return Err(reject("missing_name", format!("tool is not an object: {}", t.value)));
    }
    if name.trim().is_empty() {
        return Err(reject("missing_name", "tool without a name".into()));
    }
    let Some(mut input_schema) = t.value.get("inputSchema").cloned() else {
        return Err(reject("missing_input_schema", "tool without inputSchema".into()));
    };
    if !input_schema.is_object() {
        return Err(reject("schema_not_object", format!("inputSchema is {input_schema}")));
    }
    if let Some(ty) = input_schema.get("type")
        && ty != "object"
    {
        return Err(reject(
            "top_level_not_object",
            format!("top-level type {ty}, function calling needs object"),
        ));
    }
    let mut fixes = schema::normalise(&mut input_schema);
    if let Err(e) = schema::check(&input_schema) {
        return Err(reject("invalid_schema", e));
    }
    let function = sanitise_name(&name);
    if function != name {
        fixes.insert(
            0,
            Fix {
                kind: "name_sanitised".into(),
                pointer: "name".into(),
                detail: format!("{name:?} → {function:?}"),
            },
        );
    }
    Ok(McpTool {
        function,
        name,
        server: t.server.clone(),
        description: t
            .value
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        input_schema,
        annotations: t.value.get("annotations").cloned().unwrap_or(Value::Null),
        fixes,
        aliases: Vec::new(),
    })
}

/// `tools/mcp.json`: the catalog in MCP format, per server: `{"servers": [{name, description,
/// homepage?, category?, tools: [{name, description, inputSchema, annotations?, _meta:
/// {"toolforge/function": <OpenAI name>, "toolforge/aliases"?: [servers]}}]}]}`. A server
/// listed by several records (several registry dumps) appears once, with its first record's
/// description and every tool kept for it; a merged tool is listed once, under the server it was
/// kept for, its copies' servers in `toolforge/aliases`.
pub fn mcp_json(ing: &Ingested) -> Value {
    let mut per_server: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for t in &ing.tools {
        let mut v = json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema});
        if !t.annotations.is_null() {
            v["annotations"] = t.annotations.clone();
        }
        v["_meta"] = json!({"toolforge/function": t.function});
        if !t.aliases.is_empty() {
            v["_meta"]["toolforge/aliases"] = json!(t.aliases);
        }
        per_server.entry(t.server.as_str()).or_default().push(v);
    }
    let mut listed = std::collections::HashSet::new();
    let servers: Vec<Value> = ing
        .servers
        .iter()
        .filter(|s| listed.insert(s.name.as_str()))
        .map(|s| {
            let mut v = json!({"name": s.name, "description": s.description});
            if let Some(h) = &s.homepage {
                v["homepage"] = json!(h);
            }
            if let Some(c) = &s.category {
                v["category"] = json!(c);
            }
            v["tools"] = json!(per_server.get(s.name.as_str()).cloned().unwrap_or_default());
            v
        })
        .collect();
    json!({ "servers": servers })
}

#[cfg(test)]
mod tests;
