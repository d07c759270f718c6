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
//! Deduplication is exact: two tools merge only when they have the same server-qualified name
//! (server name and tool name, case-sensitive), the same normalised schema
//! ([`schema::canonical`]) *and* the same description — the same server listed in two registry
//! dumps. The first occurrence (file order) is kept; each merge is a [`Duplicate`]. Everything
//! else is kept, each tool with its own description: tools whose OpenAI names collide
//! (compared case-insensitively, since `whoAmI` and `whoami` are one name to many consumers)
//! are all qualified as `<server>__<name>` (`_2`, `_3`, … when that still collides; a
//! `name_qualified` fix).

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
}

/// An exact duplicate merged into an earlier tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    /// Server name.
    pub server: String,
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
    /// Exact duplicates merged (see the module doc).
    pub duplicates: Vec<Duplicate>,
    /// Skipped records.
    pub bad_records: Vec<BadRecord>,
}

mod names;
mod registry;

use names::qualify_colliding_names;
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
    let mut seen: HashMap<(String, String, String, String), usize> = HashMap::new();
    for t in raw {
        match normalise_tool(&t) {
            Err(r) => out.rejected.push(r),
            Ok(tool) => {
                let key = (
                    tool.server.clone(),
                    tool.name.clone(),
                    schema::canonical(&tool.input_schema),
                    tool.description.clone(),
                );
                match seen.get(&key) {
                    Some(&i) => out.duplicates.push(Duplicate {
                        server: tool.server,
                        tool: tool.name,
                        kept_from: origins[i].clone(),
                        duplicate_from: t.origin.clone(),
                    }),
                    None => {
                        seen.insert(key, kept.len());
                        origins.push(t.origin.clone());
                        kept.push(tool);
                    }
                }
            }
        }
    }
    qualify_colliding_names(&mut kept);
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
    })
}

/// `tools/mcp.json`: the catalog in MCP format, per server: `{"servers": [{name, description,
/// homepage?, category?, tools: [{name, description, inputSchema, annotations?, _meta:
/// {"toolforge/function": <OpenAI name>}}]}]}`. A server listed by several records (several
/// registry dumps) appears once, with its first record's description and every tool kept for it.
pub fn mcp_json(ing: &Ingested) -> Value {
    let mut per_server: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for t in &ing.tools {
        let mut v = json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema});
        if !t.annotations.is_null() {
            v["annotations"] = t.annotations.clone();
        }
        v["_meta"] = json!({"toolforge/function": t.function});
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
mod tests {
    use super::*;

    fn ingest_json(files: &[(&str, &str)]) -> Ingested {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        ingest(&inputs(dir.path()), dir.path()).unwrap()
    }

    #[test]
    fn smithery_and_tools_list_shapes() {
        let smithery = r#"{"qualifiedName": "@acme/weather", "displayName": "Weather", "description": "d",
            "tools": [{"name": "get.forecast", "description": "f", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city", "city"]}}]}"#;
        let list = r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "echo", "inputSchema": {"properties": {"text": {"type": "string"}}}}]}}"#;
        let ing = ingest_json(&[("a.json", smithery), ("echo-server.json", list)]);
        assert_eq!(
            ing.servers
                .iter()
                .map(|s| (s.name.as_str(), s.shape.as_str()))
                .collect::<Vec<_>>(),
            [("@acme/weather", "smithery"), ("echo-server", "tools_list")]
        );
        assert_eq!(ing.tools.len(), 2);
        let w = &ing.tools[0];
        assert_eq!((w.function.as_str(), w.name.as_str()), ("get_forecast", "get.forecast"));
        assert_eq!(
            w.fixes.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>(),
            ["name_sanitised", "duplicate_required"]
        );
        assert_eq!(ing.tools[1].fixes[0].kind, "top_type_object_added");
        let mcp = mcp_json(&ing);
        assert_eq!(mcp["servers"][1]["tools"][0]["_meta"]["toolforge/function"], "echo");
    }

    #[test]
    fn jsonl_and_servers_wrapper_files() {
        let tool = r#"{"name": "t", "inputSchema": {"type": "object", "properties": {}}}"#;
        let lines = format!("{{\"qualifiedName\": \"a/b\", \"tools\": [{tool}]}}\n\nnot json\n");
        let wrapper = format!("{{\"servers\": [{{\"name\": \"w\", \"tools\": [{tool}]}}]}}");
        let ing = ingest_json(&[("s.jsonl", &lines), ("w.json", &wrapper)]);
        assert_eq!(
            ing.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["a/b", "w"]
        );
        assert_eq!(
            (ing.bad_records[0].file.as_str(), ing.bad_records[0].record),
            ("s.jsonl", 2)
        );
        assert!(ing.bad_records[0].message.contains("not valid JSON"));
    }

    #[test]
    fn malformed_record_is_reported_and_skipped() {
        let text = r#"[{"name": "ok", "tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {}}}]}, 42, {"name": "bad", "tools": 7}]"#;
        let ing = ingest_json(&[("servers.json", text)]);
        assert_eq!(ing.tools.len(), 1);
        let b: Vec<_> = ing.bad_records.iter().map(|b| (b.file.as_str(), b.record)).collect();
        assert_eq!(b, [("servers.json", 1), ("servers.json", 2)]);
    }

    #[test]
    fn rejections_dedup_and_collisions() {
        let s = |name: &str, tools: &str| format!(r#"{{"name": "{name}", "tools": {tools}}}"#);
        let same = r#"{"name": "read", "inputSchema": {"type": "object", "properties": {"p": {"type": "string"}}}}"#;
        let other = r#"{"name": "read", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}"#;
        let text = format!(
            "[{}, {}, {}]",
            s(
                "A",
                &format!(
                    "[{same}, {{\"inputSchema\": {{}}}}, {{\"name\": \"s\", \"inputSchema\": {{\"type\": \"string\"}}}}]"
                )
            ),
            s(
                "B",
                &format!(
                    "[{same}, {{\"name\": \"bad\", \"inputSchema\": {{\"type\": \"object\", \"properties\": {{\"x\": {{\"type\": \"strng\"}}}}}}}}]"
                )
            ),
            s("C", &format!("[{other}, {{\"name\": \"n\"}}]"))
        );
        let ing = ingest_json(&[("x.json", &text)]);
        assert_eq!(ing.tools_in, 7);
        let reasons: Vec<_> = ing.rejected.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "missing_name",
                "top_level_not_object",
                "invalid_schema",
                "missing_input_schema"
            ]
        );
        // same name and schema on two servers: two tools, both qualified
        assert!(ing.duplicates.is_empty());
        let names: Vec<_> = ing.tools.iter().map(|t| t.function.as_str()).collect();
        assert_eq!(names, ["A__read", "B__read", "C__read"]);
    }

    /// Issue 15: dedup ignored case and description, then reported the wrong description
    /// (Smithery dump: supermemory `whoAmI` listed as `whoami` with switchboard's description;
    /// alphavantage's second `company_dividends`, described as "company splits", merged away).
    #[test]
    fn dedup_is_exact_and_each_tool_keeps_its_description() {
        let schema = r#"{"type": "object", "properties": {"symbol": {"type": "string"}}}"#;
        let t = |name: &str, desc: &str| {
            format!(r#"{{"name": "{name}", "description": "{desc}", "inputSchema": {schema}}}"#)
        };
        let smithery =
            |q: &str, tools: &[String]| format!(r#"{{"qualifiedName": "{q}", "tools": [{}]}}"#, tools.join(", "));
        let dump = format!(
            "[{}, {}, {}]",
            smithery("supermemory", &[t("whoAmI", "Get the current supermemory user")]),
            smithery("switchboard", &[t("whoami", "Show the switchboard account")]),
            smithery(
                "alphavantage",
                &[
                    t("company_dividends", "company dividends"),
                    t("company_dividends", "company splits")
                ]
            ),
        );
        // the same alphavantage server again in a second dump: an exact duplicate, merged
        let again = format!(
            r#"{{"servers": [{}]}}"#,
            smithery("alphavantage", &[t("company_dividends", "company dividends")])
        );
        let ing = ingest_json(&[("a.json", &dump), ("b.json", &again)]);
        let got: Vec<_> = ing
            .tools
            .iter()
            .map(|t| {
                (
                    t.server.as_str(),
                    t.name.as_str(),
                    t.function.as_str(),
                    t.description.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "supermemory",
                    "whoAmI",
                    "supermemory__whoAmI",
                    "Get the current supermemory user"
                ),
                (
                    "switchboard",
                    "whoami",
                    "switchboard__whoami",
                    "Show the switchboard account"
                ),
                (
                    "alphavantage",
                    "company_dividends",
                    "alphavantage__company_dividends",
                    "company dividends"
                ),
                (
                    "alphavantage",
                    "company_dividends",
                    "alphavantage__company_dividends_2",
                    "company splits"
                ),
            ]
        );
        assert_eq!(
            ing.duplicates,
            [Duplicate {
                server: "alphavantage".into(),
                tool: "company_dividends".into(),
                kept_from: "a.json#2".into(),
                duplicate_from: "b.json#0".into(),
            }]
        );
        // mcp.json lists alphavantage once, with its two distinct tools and their own descriptions
        let mcp = mcp_json(&ing);
        let servers = mcp["servers"].as_array().unwrap();
        assert_eq!(servers.len(), 3);
        let alpha: Vec<_> = servers[2]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["description"].as_str().unwrap())
            .collect();
        assert_eq!(alpha, ["company dividends", "company splits"]);
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let long = "x".repeat(80);
        let s = sanitise_name(&long);
        assert_eq!(s.len(), 64);
        assert_ne!(s, sanitise_name(&"x".repeat(81)));
    }
}
