//! An endpoint's parameterised SQL: the [`Template`] the REST lowering
//! ([`crate::sql::rest::parameterise`]) produces and an [`crate::tools::rest::Endpoint`] runs,
//! its [`Parameter`]s, and the [`slug`] rule names are built with. It lives below both so that
//! `tools` never imports `sql`.

use serde_json::Value as Json;

/// One query parameter of an endpoint.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Parameter {
    /// Parameter name (snake_case, unique within the endpoint).
    pub name: String,
    /// JSON Schema / OpenAPI type: `integer`, `number` or `string`.
    pub kind: String,
    /// What the value filters, from the column description.
    pub description: String,
    /// Whether a call may omit it: then [`Parameter::default`] is bound, or SQL `NULL` (which
    /// the query reads as "no filter") when there is none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// The value bound when an optional parameter is omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Json>,
    /// The accepted values (a string enum), if restricted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// The smallest accepted value of a numeric parameter (JSON Schema `minimum`, FastAPI's
    /// `Query(ge=…)`), if bounded: `limit` is 0 or more (SQLite reads a negative LIMIT as "no
    /// limit", which no caller of a "maximum number of rows" parameter means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<i64>,
}

/// A parameterised gold query.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// SQLite text with `?1`, `?2`, … placeholders.
    pub sql: String,
    /// The endpoint identity: the normal form of the parameterised query
    /// ([`crate::sql::normalise::key`]), with each placeholder named by its parameter.
    pub key: String,
    /// The parameters, in placeholder order.
    pub parameters: Vec<Parameter>,
    /// The question's values for the parameters (the gold call's arguments), same order.
    pub values: Vec<Json>,
    /// The main table (first FROM table), for naming.
    pub table: String,
    /// Slugs of what the query returns (`name`, `count`, `average_age`, …), for naming.
    pub returns: Vec<String>,
    /// Whether the result order is defined (top-level ORDER BY).
    pub ordered: bool,
    /// Slugs of the GROUP BY keys of the first SELECT, for naming.
    pub group_by: Vec<String>,
    /// Slugs of the top-level ORDER BY keys with `_desc` when descending, for naming.
    pub order_by: Vec<String>,
    /// The top-level LIMIT, if a number.
    pub limit: Option<String>,
    /// What the query computes, in words ([`crate::sql::describe::summary`]).
    pub summary: String,
}

/// Lower-case snake_case identifier made of ASCII letters, digits and `_`.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("v_{out}")
    } else {
        out
    }
}
