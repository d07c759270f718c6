//! The MultiWOZ 2.2 schema as tools: one [`Intent`] per 2.2 intent, its slots as `string`
//! parameters, `enum` only for categorical slots.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::corpus::{CorpusError, read_json};
use crate::tools::ToolSpec;

/// The `book_train` parameter that carries the booked train's id (not in 2.2).
pub(super) const TRAIN_ID: &str = "train-trainid";

/// One 2.2 intent as a tool, with what the conversion needs of its slots.
pub(super) struct Intent {
    pub(super) spec: ToolSpec,
    /// Slot names in schema order (required, then optional).
    pub(super) slots: Vec<String>,
    /// Categorical slots' possible values.
    pub(super) enums: BTreeMap<String, Vec<String>>,
}

/// The 2.2 schema: intents by name, services with their intents in schema order.
pub(super) struct Schema {
    pub(super) intents: BTreeMap<String, Intent>,
    pub(super) services: Vec<(String, Vec<String>)>,
}

pub(super) fn load_schema(path: &Path) -> Result<Schema, CorpusError> {
    let malformed = |message: String| CorpusError::Malformed {
        path: path.into(),
        message,
    };
    let value = read_json(path)?;
    let services = value
        .as_array()
        .ok_or_else(|| malformed("expected a JSON array of services".into()))?;
    let mut schema = Schema {
        intents: BTreeMap::new(),
        services: Vec::new(),
    };
    for s in services {
        let sname = s["service_name"]
            .as_str()
            .ok_or_else(|| malformed("service without service_name".into()))?;
        let sdesc = s["description"].as_str().unwrap_or("");
        let slots: Vec<&Value> = s["slots"].as_array().into_iter().flatten().collect();
        let slot = |name: &str| slots.iter().find(|x| x["name"] == name);
        let mut names = Vec::new();
        for intent in s["intents"].as_array().into_iter().flatten() {
            let iname = intent["name"]
                .as_str()
                .ok_or_else(|| malformed(format!("service {sname}: intent without name")))?;
            let required: Vec<&str> = intent["required_slots"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let optional: Vec<&str> = intent["optional_slots"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .collect();
            let mut props = Map::new();
            let mut enums = BTreeMap::new();
            let mut order = Vec::new();
            for name in required.iter().chain(&optional) {
                let sl = slot(name).ok_or_else(|| malformed(format!("intent {iname}: unknown slot {name}")))?;
                let mut p = json!({"type": "string", "description": sl["description"].as_str().unwrap_or(name)});
                let values: Vec<String> = sl["possible_values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                if sl["is_categorical"].as_bool() == Some(true) && !values.is_empty() {
                    p["enum"] = json!(values);
                    enums.insert(name.to_string(), values);
                }
                props.insert(name.to_string(), p);
                order.push(name.to_string());
            }
            if iname == "book_train" {
                // 2.2 has no train id slot, so a booking would not say which train it books.
                props.insert(
                    TRAIN_ID.to_string(),
                    json!({"type": "string", "description": "Id of the train to book (e.g. TR1234), as find_train returns it (toolforge extension of the 2.2 schema, which has no train id slot)"}),
                );
                order.push(TRAIN_ID.to_string());
            }
            let informable: BTreeSet<&str> = required.iter().chain(&optional).copied().collect();
            let outputs: Map<String, Value> = slots
                .iter()
                .filter_map(|x| {
                    let n = x["name"].as_str()?;
                    (!informable.contains(n)).then(|| {
                        (
                            n.to_string(),
                            json!({"type": "string", "description": x["description"]}),
                        )
                    })
                })
                .collect();
            let output_parameters = if intent["is_transactional"].as_bool() == Some(true) {
                json!({"type": "object", "properties": outputs})
            } else {
                json!({"type": "array", "items": {"type": "object", "properties": outputs}})
            };
            let spec = ToolSpec {
                name: iname.to_string(),
                description: format!("{} ({sname}: {sdesc})", intent["description"].as_str().unwrap_or(iname)),
                parameters: json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
                output_parameters,
            };
            names.push(iname.to_string());
            schema.intents.insert(
                iname.to_string(),
                Intent {
                    spec,
                    slots: order,
                    enums,
                },
            );
        }
        schema.services.push((sname.to_string(), names));
    }
    Ok(schema)
}
