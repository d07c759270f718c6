//! The SGD schemas as a tool catalog: one tool per (service, intent), named
//! `<Service>_<Intent>` ([`load_schema`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::corpus::{CorpusError, read_json};
use crate::tools::ToolSpec;

/// `<Service>_<Intent>` with every character outside `[A-Za-z0-9_]` replaced by `_`.
pub(super) fn tool_name(service: &str, intent: &str) -> String {
    format!("{service}_{intent}")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}

/// The catalog entries of one schema service: `(tool, spec)` per intent, in schema order.
pub(super) fn service_tools(service: &Value) -> Result<Vec<ToolSpec>, String> {
    let name = service["service_name"].as_str().ok_or("service without service_name")?;
    let sdesc = service["description"].as_str().unwrap_or("");
    let slots: BTreeMap<&str, &Value> = service["slots"]
        .as_array()
        .ok_or_else(|| format!("service {name}: no slots array"))?
        .iter()
        .filter_map(|s| Some((s["name"].as_str()?, s)))
        .collect();
    let param = |slot: &str| -> Result<Value, String> {
        let s = slots
            .get(slot)
            .ok_or_else(|| format!("service {name}: intent uses unknown slot {slot}"))?;
        let mut p = Map::new();
        p.insert("type".into(), json!("string"));
        p.insert("description".into(), json!(s["description"].as_str().unwrap_or(slot)));
        let values = s["possible_values"].as_array().filter(|v| !v.is_empty());
        if let (Some(true), Some(values)) = (s["is_categorical"].as_bool(), values) {
            p.insert("enum".into(), json!(values));
        }
        Ok(Value::Object(p))
    };
    let mut tools = Vec::new();
    for intent in service["intents"]
        .as_array()
        .ok_or_else(|| format!("service {name}: no intents"))?
    {
        let iname = intent["name"]
            .as_str()
            .ok_or_else(|| format!("service {name}: intent without name"))?;
        let mut props = Map::new();
        let mut required = Vec::new();
        for slot in intent["required_slots"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            props.insert(slot.into(), param(slot)?);
            required.push(json!(slot));
        }
        if let Some(optional) = intent["optional_slots"].as_object() {
            for (slot, default) in optional {
                let mut p = param(slot)?;
                if let Some(d) = default.as_str().filter(|d| *d != "dontcare") {
                    p["default"] = json!(d);
                }
                props.insert(slot.clone(), p);
            }
        }
        let mut outputs = Map::new();
        for slot in intent["result_slots"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let desc = slots.get(slot).and_then(|s| s["description"].as_str()).unwrap_or(slot);
            outputs.insert(slot.into(), json!({"type": "string", "description": desc}));
        }
        let transactional = intent["is_transactional"].as_bool().unwrap_or(false);
        tools.push(ToolSpec {
            name: tool_name(name, iname),
            description: format!(
                "{} ({name}: {sdesc}{})",
                intent["description"].as_str().unwrap_or(iname),
                if transactional { "; transactional" } else { "" }
            ),
            parameters: json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
            output_parameters: json!({"type": "array", "items": {"type": "object", "properties": outputs}}),
        });
    }
    Ok(tools)
}

/// The schema catalog: services by name (first split wins) → their tools; plus conflicts.
pub(super) struct Schema {
    pub(super) services: BTreeMap<String, Vec<ToolSpec>>,
    /// Intent description per tool, for the request text.
    pub(super) phrases: BTreeMap<String, String>,
    pub(super) conflicts: usize,
}

pub(super) fn load_schema(root: &Path, splits: &[&str]) -> Result<Schema, CorpusError> {
    let mut raw: BTreeMap<String, Value> = BTreeMap::new();
    let mut conflicts = 0;
    for split in splits {
        let path = root.join(split).join("schema.json");
        if !path.is_file() {
            continue;
        }
        let value = read_json(&path)?;
        let services = value.as_array().ok_or_else(|| CorpusError::Malformed {
            path: path.clone(),
            message: "expected a JSON array of services".into(),
        })?;
        for s in services {
            let Some(name) = s["service_name"].as_str() else {
                return Err(CorpusError::Malformed {
                    path: path.clone(),
                    message: "service without service_name".into(),
                });
            };
            match raw.get(name) {
                Some(prev) if prev != s => conflicts += 1,
                Some(_) => {}
                None => {
                    raw.insert(name.to_string(), s.clone());
                }
            }
        }
    }
    let mut services = BTreeMap::new();
    let mut phrases = BTreeMap::new();
    for (name, s) in &raw {
        let tools = service_tools(s).map_err(|message| CorpusError::Malformed {
            path: root.join("schema.json"),
            message,
        })?;
        for intent in s["intents"].as_array().into_iter().flatten() {
            let iname = intent["name"].as_str().unwrap_or_default();
            phrases.insert(
                tool_name(name, iname),
                intent["description"].as_str().unwrap_or(iname).to_string(),
            );
        }
        services.insert(name.clone(), tools);
    }
    Ok(Schema {
        services,
        phrases,
        conflicts,
    })
}
