//! The offline fallback request of a SeqMultiWOZ row (`templates/seq-multiwoz-request.j2`):
//! one sentence per call, "I want to find a restaurant in the cheap price range and …".

use serde_json::{Value, json};

use super::REQUEST_TEMPLATE;
use crate::tools::Call;

/// Clause of the fallback request per 2.2 slot suffix; `{}` is the value.
pub(super) const SLOT_CLAUSES: [(&str, &str); 19] = [
    ("pricerange", "in the {} price range"),
    ("area", "in the {} area"),
    ("food", "serving {} food"),
    ("name", "called {}"),
    ("type", "of type {}"),
    ("parking", "with parking: {}"),
    ("stars", "with {} stars"),
    ("internet", "with internet: {}"),
    ("department", "for the {} department"),
    ("leaveat", "leaving after {}"),
    ("arriveby", "arriving by {}"),
    ("destination", "going to {}"),
    ("departure", "departing from {}"),
    ("day", "on {}"),
    ("bookpeople", "for {} people"),
    ("bookday", "on {}"),
    ("bookstay", "for {} nights"),
    ("booktime", "at {}"),
    ("trainid", "on train {}"),
];

pub(super) fn phrase(intent: &str) -> String {
    match intent.split_once('_') {
        Some((verb, "attraction")) => format!("{verb} an attraction"),
        Some((verb, obj)) => format!("{verb} a {obj}"),
        None => format!("find the {intent} station"),
    }
}

/// The fallback request's clause for one argument (`in the cheap price range`, `for 2 people`);
/// yes/no flags read `with free parking` / `without parking`.
pub(super) fn slot_clause(slot: &str, value: &str) -> String {
    let suffix = slot.split_once('-').map(|(_, s)| s).unwrap_or(slot);
    match (suffix, value) {
        ("parking", "yes" | "free") => return "with free parking".into(),
        ("parking", "no") => return "without parking".into(),
        ("internet", "yes" | "free") => return "with free wifi".into(),
        ("internet", "no") => return "without wifi".into(),
        _ => {}
    }
    SLOT_CLAUSES
        .iter()
        .find(|(s, _)| *s == suffix)
        .map(|(_, c)| c.replace("{}", value))
        .unwrap_or_else(|| format!("with {} {value}", suffix))
}

pub(super) fn render_request(calls: &[Call]) -> Result<String, String> {
    let steps: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({
                "phrase": phrase(&c.name),
                "clauses": c.arguments.iter().map(|(k, v)| slot_clause(k, v.as_str().unwrap_or_default())).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut env = minijinja::Environment::new();
    env.add_template("request", REQUEST_TEMPLATE)
        .map_err(|e| e.to_string())?;
    let tmpl = env.get_template("request").map_err(|e| e.to_string())?;
    tmpl.render(minijinja::value::Serde(json!({"steps": steps})))
        .map_err(|e| e.to_string())
}
