//! The offline fallback request of a SeqSGD row (`templates/seq-sgd-request.j2`): one sentence
//! per call, "`<intent description>`, where the `<slot description>` is `<value>` and …".

use serde_json::{Value, json};

use super::REQUEST_TEMPLATE;
use super::schema::Schema;
use crate::tools::Call;

/// The description of a slot without its trailing period, first letter lower-cased unless the
/// first word is an acronym.
pub(super) fn lower_first(text: &str) -> String {
    let t = text.trim().trim_end_matches('.').trim();
    let mut chars = t.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && !b.is_uppercase() => {
            a.to_lowercase().chain(t[a.len_utf8()..].chars()).collect()
        }
        _ => t.to_string(),
    }
}

/// One clause of the fallback request for an argument: `the <slot description> is <value>`, or
/// for a `True`/`False` slot described as "Whether …" / "Boolean flag indicating if …",
/// `<what it says>: yes|no`.
pub(super) fn clause(description: &str, value: &str) -> String {
    let d = description.trim().trim_end_matches('.');
    let flag = [
        "Boolean flag indicating whether ",
        "Boolean flag indicating if ",
        "Boolean flag whether ",
        "Whether or not ",
        "Whether ",
    ]
    .iter()
    .find_map(|p| d.strip_prefix(p));
    match (flag, value) {
        (Some(rest), "True" | "False") => format!(
            "{}: {}",
            rest.trim_end_matches(" or not"),
            if value == "True" { "yes" } else { "no" }
        ),
        _ => {
            let d = lower_first(d);
            if d.starts_with("the ") || d.starts_with("a ") {
                format!("{d} is {value}")
            } else if d.starts_with("whether ") {
                format!("the choice of {d} is {value}")
            } else {
                format!("the {d} is {value}")
            }
        }
    }
}

/// Renders the fallback request text of a call sequence (`templates/seq-sgd-request.j2`).
pub(super) fn render_request(calls: &[Call], schema: &Schema) -> Result<String, String> {
    let steps: Vec<Value> = calls
        .iter()
        .map(|c| {
            let phrase = schema.phrases.get(&c.name).cloned().unwrap_or_else(|| c.name.clone());
            let phrase = phrase.trim().trim_end_matches('.').trim().to_string();
            let spec = schema.services.values().flatten().find(|t| t.name == c.name);
            let clauses: Vec<String> = c
                .arguments
                .iter()
                .map(|(k, v)| {
                    let desc = spec
                        .and_then(|t| t.parameters["properties"][k]["description"].as_str())
                        .unwrap_or(k);
                    clause(
                        desc,
                        v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()).as_str(),
                    )
                })
                .collect();
            json!({"phrase": phrase, "phrase_lower": lower_first(&phrase), "clauses": clauses})
        })
        .collect();
    let mut env = minijinja::Environment::new();
    env.add_template("request", REQUEST_TEMPLATE)
        .map_err(|e| e.to_string())?;
    let tmpl = env.get_template("request").map_err(|e| e.to_string())?;
    tmpl.render(minijinja::value::Serde(json!({"steps": steps})))
        .map_err(|e| e.to_string())
}
