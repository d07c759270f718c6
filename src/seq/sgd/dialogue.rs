//! The parts of an SGD dialogue record the conversion reads: executed service calls (with the
//! system's failure report) and the user's surface forms of canonical values.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One executed service call of a dialogue.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ServiceCall {
    pub(super) service: String,
    pub(super) method: String,
    pub(super) parameters: Map<String, Value>,
    /// The system reported the call as failed: a `NOTIFY_FAILURE` action in the frame that holds
    /// the `service_call` ("The reservation could not be made").
    pub(super) failed: bool,
}

/// The parts of a dialogue record the conversion reads.
#[derive(Debug)]
pub(super) struct Dialogue {
    pub(super) id: String,
    pub(super) services: Vec<String>,
    pub(super) calls: Vec<ServiceCall>,
    /// (slot, canonical value, what the user said) where the two differ, first occurrence.
    pub(super) surface_forms: Vec<(String, String, String)>,
}

pub(super) fn parse_dialogue(rec: &Value) -> Result<Dialogue, String> {
    let obj = rec.as_object().ok_or("expected a dialogue object")?;
    let id = obj
        .get("dialogue_id")
        .and_then(Value::as_str)
        .ok_or("missing string field `dialogue_id`")?
        .to_string();
    let services = obj
        .get("services")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("dialogue {id}: missing array field `services`"))?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| format!("dialogue {id}: `services` must hold strings"))?;
    let turns = obj
        .get("turns")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("dialogue {id}: missing array field `turns`"))?;
    let mut calls = Vec::new();
    let mut surface_forms = Vec::new();
    let mut seen = BTreeSet::new();
    for (ti, turn) in turns.iter().enumerate() {
        let frames = turn["frames"]
            .as_array()
            .ok_or_else(|| format!("dialogue {id}: turn {ti} has no `frames` array"))?;
        let speaker = turn["speaker"].as_str().unwrap_or_default();
        for frame in frames {
            if speaker == "USER" {
                for action in frame["actions"].as_array().into_iter().flatten() {
                    let slot = action["slot"].as_str().unwrap_or_default();
                    let said = action["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str);
                    let canon = action["canonical_values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str);
                    for (s, c) in said.zip(canon) {
                        if s != c && seen.insert((slot.to_string(), c.to_string())) {
                            surface_forms.push((slot.to_string(), c.to_string(), s.to_string()));
                        }
                    }
                }
            }
            let Some(sc) = frame.get("service_call") else { continue };
            let service = frame["service"]
                .as_str()
                .ok_or_else(|| format!("dialogue {id}: turn {ti}: service_call frame without `service`"))?;
            let method = sc["method"]
                .as_str()
                .ok_or_else(|| format!("dialogue {id}: turn {ti}: service_call without `method`"))?;
            let parameters = sc["parameters"]
                .as_object()
                .ok_or_else(|| format!("dialogue {id}: turn {ti}: service_call without `parameters` object"))?;
            let failed = frame["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| a["act"] == "NOTIFY_FAILURE");
            calls.push(ServiceCall {
                service: service.to_string(),
                method: method.to_string(),
                parameters: parameters.clone(),
                failed,
            });
        }
    }
    Ok(Dialogue {
        id,
        services,
        calls,
        surface_forms,
    })
}
