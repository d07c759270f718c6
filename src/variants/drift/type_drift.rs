//! `type_drift`: an `integer` / `number` / `boolean` property becomes `string` (its default too;
//! the description says "(a `<type>` written as a string)") with a `pattern` ([`pattern`]) that
//! admits exactly the texts un-migration parses, so A_new states what the server accepts.
//!
//! Migration: the value written as text (`-1` → `"-1"`; loud when the call has a non-null,
//! non-string value). Un-migration: the text parsed back as the A_old type (an error when it
//! does not parse).

use serde_json::{Map, Value, json};

use super::{Change, Rng, pick_some};

fn single_type(p: &Value) -> Option<&str> {
    p["type"]
        .as_str()
        .filter(|t| matches!(*t, "integer" | "number" | "boolean"))
}

/// Some of the scalar-typed parameters of `ps` not in `taken`.
pub(super) fn propose(ps: &[(String, Value)], taken: &[String], rng: &mut Rng) -> Vec<Change> {
    let el: Vec<(String, String)> = ps
        .iter()
        .filter(|(n, _)| !taken.contains(n))
        .filter_map(|(n, p)| single_type(p).map(|t| (n.clone(), t.to_string())))
        .collect();
    pick_some(&el, rng)
        .into_iter()
        .map(|(parameter, from)| Change::TypeDrift { parameter, from })
        .collect()
}

fn stringify(v: &Value) -> Value {
    match v {
        Value::Bool(b) => json!(b.to_string()),
        Value::Number(n) => json!(n.to_string()),
        other => other.clone(),
    }
}

fn parse_back(v: &Value, from: &str) -> Result<Value, String> {
    let Value::String(s) = v else { return Ok(v.clone()) };
    let t = s.trim();
    let parsed = match from {
        "boolean" => match t.to_ascii_lowercase().as_str() {
            "true" => Some(json!(true)),
            "false" => Some(json!(false)),
            _ => None,
        },
        "integer" => t.parse::<i64>().ok().map(Value::from),
        _ => t
            .parse::<i64>()
            .ok()
            .map(Value::from)
            .or_else(|| t.parse::<f64>().ok().filter(|f| f.is_finite()).map(Value::from)),
    };
    parsed.ok_or_else(|| format!("{s:?} is not a valid {from}"))
}

/// The A_new `pattern` of a `from`-typed property written as a string: the texts
/// un-migration parses back (surrounding blanks allowed; `true` / `false` in any case).
pub fn pattern(from: &str) -> &'static str {
    match from {
        "boolean" => r"^\s*([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])\s*$",
        "integer" => r"^\s*[+-]?[0-9]+\s*$",
        _ => r"^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$",
    }
}

/// A_new: the property's type (and default) as a string with [`pattern`].
pub(super) fn apply(properties: &mut Map<String, Value>, parameter: &str, from: &str) {
    if let Some(p) = properties.get_mut(parameter) {
        p["type"] = json!("string");
        p["pattern"] = json!(pattern(from));
        if let Some(d) = p.get("default").cloned() {
            p["default"] = stringify(&d);
        }
        let desc = p["description"].as_str().unwrap_or_default().to_string();
        p["description"] = json!(format!("{desc} (a {from} written as a string)").trim().to_string());
    }
}

/// Migration; `true` when a value was rewritten (loud).
pub(super) fn migrate(args: &mut Map<String, Value>, parameter: &str) -> bool {
    if let Some(v) = args.get_mut(parameter).filter(|v| !v.is_null() && !v.is_string()) {
        *v = stringify(v);
        return true;
    }
    false
}

/// Un-migration: the value parsed back as `from`.
pub(super) fn unmigrate(args: &mut Map<String, Value>, parameter: &str, from: &str) -> Result<(), String> {
    if let Some(v) = args.get(parameter) {
        let back = parse_back(v, from).map_err(|e| format!("argument `{parameter}`: {e}"))?;
        args.insert(parameter.to_string(), back);
    }
    Ok(())
}
