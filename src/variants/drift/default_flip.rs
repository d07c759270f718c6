//! `default_flip`: a stated default changes — a boolean `d` becomes `!d`; an enum's default
//! becomes the next choice of the enum (REST's `sort_order` `"asc"` ↔ `"desc"`). A_new states
//! the new default (REST: as the query parameter's default, which `serve` binds when the
//! argument is omitted), in the schema's `default` and in the parameter's description
//! ([`state_default`]: "default `asc`" becomes "default `desc`"; a description that names no
//! default gets "Default: `desc`." appended), so the text never contradicts the schema.
//!
//! Migration: the old default made explicit when the call omits the argument (quiet: the old
//! call stays valid but would silently change meaning). Un-migration: an omitted argument takes
//! the *new* default (what A_new means by omitting it).

use serde_json::{Map, Value, json};

use super::{Change, Rng};

/// The flipped default of a property: `!d` for a boolean default, the enum's next choice
/// (cyclically) for a default among at least two choices; `None` otherwise.
pub fn flipped(p: &Value) -> Option<Value> {
    let d = p.get("default")?;
    if let Some(b) = d.as_bool() {
        return Some(json!(!b));
    }
    let choices = p["enum"].as_array().filter(|c| c.len() >= 2)?;
    let i = choices.iter().position(|c| c == d)?;
    Some(choices[(i + 1) % choices.len()].clone())
}

/// One parameter of `ps` not in `taken` whose default can flip ([`flipped`]).
pub(super) fn propose(ps: &[(String, Value)], taken: &[String], rng: &mut Rng) -> Vec<Change> {
    let el: Vec<(String, Value, Value)> = ps
        .iter()
        .filter(|(n, _)| !taken.contains(n))
        .filter_map(|(n, p)| flipped(p).map(|new| (n.clone(), p["default"].clone(), new)))
        .collect();
    if el.is_empty() {
        vec![]
    } else {
        let (parameter, old, new) = el[rng.below(el.len())].clone();
        vec![Change::DefaultFlip { parameter, old, new }]
    }
}

/// A_new: the new default, in `default` and in the description ([`state_default`]).
pub(super) fn apply(properties: &mut Map<String, Value>, parameter: &str, new: &Value) {
    if let Some(p) = properties.get_mut(parameter) {
        let old = p.get("default").cloned();
        p["default"] = new.clone();
        if let Some(old) = old {
            let text = state_default(p.get("description").and_then(Value::as_str).unwrap_or(""), &old, new);
            p["description"] = json!(text);
        }
    }
}

/// A default as a description writes it: a string without quotes, other values as JSON.
fn spelled(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `description` stating `new` as the default instead of `old`: every "default" word (any case)
/// followed by optional `:` or `is`, spaces and an optional backtick or quote, then `old`, has
/// `old` replaced by `new`; when no such statement exists, "Default: `new`." is appended.
pub fn state_default(description: &str, old: &Value, new: &Value) -> String {
    let (old, new) = (spelled(old), spelled(new));
    let lower = description.to_ascii_lowercase();
    let mut out = String::with_capacity(description.len() + new.len());
    let mut i = 0;
    let mut replaced = false;
    while let Some(at) = lower[i..].find("default") {
        let word_start = i + at;
        let mut j = word_start + "default".len();
        let before_ok = !description[..word_start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        let rest = &description[j..];
        let skip = rest.len() - rest.trim_start_matches([':', ' ']).len();
        j += skip;
        if lower[j..].starts_with("is ") {
            j += 3;
            j += description[j..].len() - description[j..].trim_start().len();
        }
        if description[j..].starts_with(['`', '\'', '"']) {
            j += 1;
        }
        let value_end = j + old.len();
        let after_ok = description[j..].starts_with(old.as_str())
            && !description[value_end..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if before_ok && after_ok {
            out.push_str(&description[i..j]);
            out.push_str(&new);
            i = value_end;
            replaced = true;
        } else {
            out.push_str(&description[i..word_start + "default".len()]);
            i = word_start + "default".len();
        }
    }
    out.push_str(&description[i..]);
    if !replaced {
        if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
        out.push_str(&format!("Default: `{new}`."));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30: all 8 REST flipped parameters described the old default while `default` held
    /// the new one.
    #[test]
    fn default_flip_description_states_the_new_default() {
        let d = "Sort direction of the rows by age: `asc` (ascending) or `desc` (descending); default `asc`.";
        assert_eq!(
            state_default(d, &json!("asc"), &json!("desc")),
            "Sort direction of the rows by age: `asc` (ascending) or `desc` (descending); default `desc`."
        );
        let mut props = Map::new();
        props.insert(
            "sort_order".into(),
            json!({"type": "string", "enum": ["asc", "desc"], "default": "asc", "description": d}),
        );
        apply(&mut props, "sort_order", &json!("desc"));
        let text = props["sort_order"]["description"].as_str().unwrap();
        assert!(
            text.ends_with("default `desc`.") && !text.contains("default `asc`"),
            "{text}"
        );
        // A parameter without a description (SLOT's `distinct`) gets one stating the default.
        props.insert("distinct".into(), json!({"type": "boolean", "default": false}));
        apply(&mut props, "distinct", &json!(true));
        assert_eq!(props["distinct"]["description"], "Default: `true`.");
        // No stated default: one is added; booleans spelled as JSON.
        assert_eq!(
            state_default("Smallest first when true.", &json!(false), &json!(true)),
            "Smallest first when true. Default: `true`."
        );
        assert_eq!(
            state_default("Default: false", &json!(false), &json!(true)),
            "Default: true"
        );
        // "defaults" or "default" naming something else is left alone.
        assert_eq!(
            state_default("Uses the default order.", &json!("asc"), &json!("desc")),
            "Uses the default order. Default: `desc`."
        );
    }
}

/// Migration and un-migration alike: an omitted argument gets `value` (migration: the A_old
/// default; un-migration: the A_new default).
pub(super) fn fill(args: &mut Map<String, Value>, parameter: &str, value: &Value) {
    if !args.contains_key(parameter) {
        args.insert(parameter.to_string(), value.clone());
    }
}
