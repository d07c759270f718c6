//! FastAPI's query-parameter validation as pydantic v2 applies it, for [`super::Endpoint`]'s
//! `arguments_from_query` / `arguments_from_json`: lax parsing of integers and numbers from text,
//! `Literal[...]` enums, `Query(ge=…)` minimums, and each failure's error object exactly as
//! FastAPI writes it in a 422 `detail` list (`type`, `loc`, `msg`, `input`, `ctx`).

use serde_json::{Value as Json, json};

use crate::tools::template::Parameter;

pub(super) fn parse_typed(kind: &str, raw: &str) -> Option<Json> {
    match kind {
        // pydantic v2's lax rules, as FastAPI applies them to query parameters.
        "integer" => crate::tools::lax::int(raw),
        "number" => crate::tools::lax::float(raw).map(Json::from),
        _ => Some(json!(raw)),
    }
}

pub(super) fn choice_ok(p: &Parameter, v: &Json) -> bool {
    p.choices.is_empty() || v.as_str().is_some_and(|s| p.choices.iter().any(|c| c == s))
}

/// Whether a numeric value respects the parameter's `minimum` (true when unbounded).
pub(super) fn minimum_ok(p: &Parameter, v: &Json) -> bool {
    match (p.minimum, v.as_f64()) {
        (Some(m), Some(x)) => x >= m as f64,
        _ => true,
    }
}

/// Pydantic's error for a value below `Query(ge=…)`.
pub(super) fn minimum_error(p: &Parameter, input: Json) -> Json {
    let m = p.minimum.unwrap_or_default();
    json!({"type": "greater_than_equal", "loc": ["query", p.name],
        "msg": format!("Input should be greater than or equal to {m}"), "input": input, "ctx": {"ge": m}})
}

/// Pydantic's error for a value outside a `Literal[...]` enum.
pub(super) fn enum_error(p: &Parameter, input: Json) -> Json {
    let quoted: Vec<String> = p.choices.iter().map(|c| format!("'{c}'")).collect();
    let expected = match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    };
    json!({"type": "literal_error", "loc": ["query", p.name], "msg": format!("Input should be {expected}"), "input": input})
}

pub(super) fn type_error(p: &Parameter, input: Json) -> Json {
    let (ty, msg) = match p.kind.as_str() {
        "integer" => (
            "int_parsing",
            "Input should be a valid integer, unable to parse string as an integer",
        ),
        "number" => (
            "float_parsing",
            "Input should be a valid number, unable to parse string as a number",
        ),
        _ => ("string_type", "Input should be a valid string"),
    };
    json!({"type": ty, "loc": ["query", p.name], "msg": msg, "input": input})
}
