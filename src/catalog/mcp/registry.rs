//! Reading MCP registry dumps: the input files of a source and the record shapes they hold
//! (LiveMCPBench, Smithery, `tools/list` results; see the parent module).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Server;
use crate::corpus::CorpusError;

/// The input files of an MCP source: every `*.json` / `*.jsonl` directly under the root, sorted.
pub fn inputs(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "json" || e == "jsonl"));
    files.sort();
    files
}

fn str_field(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// Splits one record into its server and tools; `Err` says what shape was expected.
pub fn parse_record(rec: &Value, file_stem: &str, origin: &str, several: bool) -> Result<(Server, Vec<Value>), String> {
    let Value::Object(o) = rec else {
        return Err(
            "expected an object (LiveMCPBench server, Smithery server, {server_info, tools} snapshot or tools/list result)"
                .into(),
        );
    };
    let tool_array = |v: &Value, what: &str| -> Result<Vec<Value>, String> {
        v.as_array().cloned().ok_or_else(|| format!("{what} is not an array"))
    };
    if o.contains_key("jsonrpc") || o.contains_key("result") {
        let tools = o
            .get("result")
            .and_then(|r| r.get("tools"))
            .ok_or("tools/list response without result.tools")?;
        let name = match (several, o.get("id")) {
            (true, Some(id)) => format!(
                "{file_stem}#{}",
                id.as_str().map(str::to_string).unwrap_or_else(|| id.to_string())
            ),
            _ => file_stem.to_string(),
        };
        let server = Server {
            name,
            display_name: None,
            description: String::new(),
            homepage: None,
            category: None,
            shape: "tools_list".into(),
            origin: origin.into(),
        };
        return Ok((server, tool_array(tools, "result.tools")?));
    }
    if let Some(info) = o.get("server_info").filter(|i| i.is_object()) {
        // A server snapshot `{server_info: {...}, tools: [...]}` (ToolGym's Smithery dumps): the
        // server's name is its `qualifiedName`, `name` or `server_name`, else the file's stem.
        let name = ["qualifiedName", "name", "server_name", "id"]
            .iter()
            .find_map(|k| str_field(info, k))
            .unwrap_or_else(|| file_stem.to_string());
        let server = Server {
            display_name: str_field(info, "displayName").filter(|d| *d != name),
            description: str_field(info, "description").unwrap_or_default(),
            homepage: str_field(info, "homepage").or_else(|| str_field(info, "url")),
            category: str_field(info, "category"),
            name,
            shape: "snapshot".into(),
            origin: origin.into(),
        };
        let tools = o.get("tools").ok_or("server snapshot without tools")?;
        return Ok((server, tool_array(tools, "tools")?));
    }
    if let Some(q) = str_field(rec, "qualifiedName") {
        let server = Server {
            display_name: str_field(rec, "displayName").filter(|d| *d != q),
            name: q,
            description: str_field(rec, "description").unwrap_or_default(),
            homepage: str_field(rec, "homepage"),
            category: None,
            shape: "smithery".into(),
            origin: origin.into(),
        };
        let tools = o.get("tools").ok_or("Smithery server without tools")?;
        return Ok((server, tool_array(tools, "tools")?));
    }
    let name = str_field(rec, "name").ok_or("server record without a string name (and not Smithery or tools/list)")?;
    let server = Server {
        name,
        display_name: None,
        description: str_field(rec, "description").unwrap_or_default(),
        homepage: str_field(rec, "web"),
        category: str_field(rec, "category"),
        shape: "livemcpbench".into(),
        origin: origin.into(),
    };
    let tools = match o.get("tools") {
        Some(Value::Array(a)) => a.clone(),
        Some(Value::Object(groups)) => {
            let mut all = Vec::new();
            for (key, g) in groups {
                all.extend(tool_array(
                    g.get("tools").unwrap_or(&Value::Null),
                    &format!("tools.{key}.tools"),
                )?);
            }
            all
        }
        _ => return Err("server record without tools (array or {key: {tools: [...]}})".into()),
    };
    Ok((server, tools))
}

/// Reads the records of one file (array, `{servers: [...]}`, single object or JSON Lines), each
/// with its index (JSON Lines: the 0-based line number; blank lines are skipped).
pub(super) fn file_records(path: &Path) -> Result<Vec<(usize, Result<Value, String>)>, CorpusError> {
    if path.extension().is_some_and(|e| e == "jsonl") {
        return Ok(crate::corpus::json_lines(&crate::corpus::read_text(path)?));
    }
    let v: Value = crate::corpus::read_json_lossy(path)?;
    let checked = |v: Value| crate::corpus::invalid_record(&v).map_or(Ok(v), Err);
    Ok(match v {
        Value::Array(a) => a.into_iter().map(checked).enumerate().collect(),
        Value::Object(mut o) if o.len() == 1 && o.get("servers").is_some_and(Value::is_array) => {
            let Some(Value::Array(a)) = o.remove("servers") else {
                unreachable!()
            };
            a.into_iter().map(checked).enumerate().collect()
        }
        other => vec![(0, checked(other))],
    })
}
