//! REST endpoints synthesised from gold SQL: definition, naming, argument validation (FastAPI's
//! rules and error shapes) and execution with bound parameters on a read-only connection.
//!
//! An [`Endpoint`] is one `GET` route: `path` `/v1/<source>/<db_id>/<table>/<returns>`, a function
//! `name` (`get_<table>_<returns>[_by_<parameters>]`, at most 64 characters, unique per database),
//! a summary sentence, the parameterised SQL ([`crate::sql::rest`]) and its query parameters.
//! The response body is the result rows as a JSON array of arrays.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};

use super::ToolSpec;
use crate::sql::rest::{Parameter, Template, slug};
use crate::verify::{Answer, Datum};

/// One synthesised GET endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Database id.
    pub db_id: String,
    /// Function / route name (FastAPI's `route.name`).
    pub name: String,
    /// Route path.
    pub path: String,
    /// One sentence: what the endpoint returns.
    pub summary: String,
    /// SQLite text with `?1…?N` placeholders, run with bound parameters.
    pub sql: String,
    /// Query parameters, in placeholder order.
    pub parameters: Vec<Parameter>,
    /// Whether the row order is defined.
    pub ordered: bool,
}

/// An argument error in FastAPI's shape: `{"type", "loc": ["query", name], "msg", "input"}`.
pub type ValidationError = Json;

/// Limits on one execution.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-clock limit of the query.
    pub timeout: Duration,
    /// Most rows returned.
    pub max_rows: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_secs(5),
            max_rows: 100_000,
        }
    }
}

/// Why an execution failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The query ran past [`Limits::timeout`].
    #[error("the query ran longer than the {0} ms limit")]
    Timeout(u128),
    /// The result has more rows than [`Limits::max_rows`].
    #[error("the result has more than {0} rows (response-size cap)")]
    TooLarge(usize),
    /// SQLite failed (never expected for a verified endpoint).
    #[error("database error: {0}")]
    Database(String),
}

/// Python's `str.title()`, as pydantic builds a field title: `min_age` → `Min Age`.
pub fn title(name: &str) -> String {
    let mut out = String::new();
    let mut prev_letter = false;
    for ch in name.chars() {
        if ch.is_alphabetic() {
            if prev_letter {
                out.extend(ch.to_lowercase())
            } else {
                out.extend(ch.to_uppercase())
            }
            prev_letter = true;
        } else {
            out.push(if ch == '_' { ' ' } else { ch });
            prev_letter = false;
        }
    }
    out
}

impl Endpoint {
    /// The operation id FastAPI generates (`generate_unique_id`): `name + path` with every
    /// non-word character replaced by `_`, then `_get`.
    pub fn operation_id(&self) -> String {
        let raw = format!("{}{}", self.name, self.path);
        let id: String = raw
            .chars()
            .map(|c| if c.is_alphanumeric() || c == '_' { c } else { '_' })
            .collect();
        format!("{id}_get")
    }

    /// The endpoint as a tool (OpenAI function format parameters).
    pub fn tool_spec(&self) -> ToolSpec {
        let props: Map<String, Json> = self
            .parameters
            .iter()
            .map(|p| (p.name.clone(), json!({"type": p.kind, "description": p.description})))
            .collect();
        let required: Vec<&str> = self.parameters.iter().map(|p| p.name.as_str()).collect();
        ToolSpec {
            name: self.name.clone(),
            description: format!("{} (GET {})", self.summary, self.path),
            parameters: json!({"type": "object", "properties": props, "required": required}),
            output_parameters: json!({"type": "object", "properties": {"output_0": {"type": "array", "description": "The result rows, each an array of values."}}}),
        }
    }

    /// Validates query-string arguments like FastAPI: every parameter required; `integer` and
    /// `number` parsed from text. Returns the bound values in placeholder order, or every error.
    pub fn arguments_from_query(&self, query: &[(String, String)]) -> Result<Vec<Json>, Vec<ValidationError>> {
        let mut values = Vec::new();
        let mut errors = Vec::new();
        for p in &self.parameters {
            // FastAPI reads the last occurrence of a repeated scalar query parameter.
            let Some(raw) = query.iter().rev().find(|(k, _)| k == &p.name).map(|(_, v)| v) else {
                errors
                    .push(json!({"type": "missing", "loc": ["query", p.name], "msg": "Field required", "input": null}));
                continue;
            };
            match parse_typed(&p.kind, raw) {
                Some(v) => values.push(v),
                None => errors.push(type_error(p, json!(raw))),
            }
        }
        if errors.is_empty() { Ok(values) } else { Err(errors) }
    }

    /// Validates JSON arguments (a gold call or a `POST` body): required, no unknown names,
    /// values of the declared type (numbers given as text are parsed, as FastAPI would).
    pub fn arguments_from_json(&self, args: &Map<String, Json>) -> Result<Vec<Json>, Vec<ValidationError>> {
        let mut errors: Vec<Json> = args
            .keys()
            .filter(|k| !self.parameters.iter().any(|p| &p.name == *k))
            .map(|k| json!({"type": "extra_forbidden", "loc": ["query", k], "msg": "Extra inputs are not permitted", "input": args[k]}))
            .collect();
        let mut values = Vec::new();
        for p in &self.parameters {
            match args.get(&p.name) {
                None => errors
                    .push(json!({"type": "missing", "loc": ["query", p.name], "msg": "Field required", "input": null})),
                Some(v) => {
                    let typed = match (p.kind.as_str(), v) {
                        ("string", Json::String(_)) => Some(v.clone()),
                        ("integer", Json::Number(n)) if n.is_i64() => Some(v.clone()),
                        ("number", Json::Number(_)) => Some(v.clone()),
                        (kind, Json::String(s)) => parse_typed(kind, s),
                        ("string", Json::Number(n)) => Some(json!(n.to_string())),
                        _ => None,
                    };
                    match typed {
                        Some(t) => values.push(t),
                        None => errors.push(type_error(p, v.clone())),
                    }
                }
            }
        }
        if errors.is_empty() { Ok(values) } else { Err(errors) }
    }

    /// Runs the endpoint's SQL with `values` bound (never spliced into the text) under `limits`.
    pub fn execute(
        &self,
        conn: &mut rusqlite::Connection,
        values: &[Json],
        limits: Limits,
    ) -> Result<Answer, RunError> {
        let deadline = Instant::now() + limits.timeout;
        conn.progress_handler(1000, Some(move || Instant::now() > deadline))
            .map_err(|e| RunError::Database(e.to_string()))?;
        let conn_ref: &rusqlite::Connection = conn;
        let result = (|| {
            let mut stmt = conn_ref
                .prepare_cached(&self.sql)
                .map_err(|e| RunError::Database(e.to_string()))?;
            let params = values.iter().map(|v| match v {
                Json::Number(n) if n.is_i64() => rusqlite::types::Value::Integer(n.as_i64().unwrap_or_default()),
                Json::Number(n) => rusqlite::types::Value::Real(n.as_f64().unwrap_or_default()),
                Json::String(s) => rusqlite::types::Value::Text(s.clone()),
                _ => rusqlite::types::Value::Null,
            });
            let mut rows = stmt
                .query(rusqlite::params_from_iter(params))
                .map_err(|e| RunError::Database(e.to_string()))?;
            let mut out: Answer = Vec::new();
            loop {
                let row = match rows.next() {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(rusqlite::Error::SqliteFailure(e, _))
                        if e.code == rusqlite::ErrorCode::OperationInterrupted =>
                    {
                        return Err(RunError::Timeout(limits.timeout.as_millis()));
                    }
                    Err(e) => return Err(RunError::Database(e.to_string())),
                };
                if out.len() == limits.max_rows {
                    return Err(RunError::TooLarge(limits.max_rows));
                }
                let n = row.as_ref().column_count();
                out.push(
                    (0..n)
                        .map(|i| {
                            row.get_ref(i)
                                .map(super::table::datum_from_sqlite)
                                .unwrap_or(Datum::Null)
                        })
                        .collect(),
                );
            }
            Ok(out)
        })();
        let _ = conn.progress_handler(0, None::<fn() -> bool>);
        result
    }
}

fn parse_typed(kind: &str, raw: &str) -> Option<Json> {
    match kind {
        // pydantic v2's lax rules, as FastAPI applies them to query parameters.
        "integer" => super::lax::int(raw),
        "number" => super::lax::float(raw).map(Json::from),
        _ => Some(json!(raw)),
    }
}

fn type_error(p: &Parameter, input: Json) -> Json {
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

fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    s[..max].trim_end_matches('_').to_string()
}

/// Builds the endpoints of one database from its distinct templates (in first-question order),
/// naming each uniquely: `get_<table>_<returns>[_by_<parameters>][_per_<group>][_sorted_by_<keys>][_top_<n>]`,
/// capped at 56 characters (OpenAI function names allow 64) and suffixed `_2`, `_3`, … on collision; the path mirrors
/// the name under `/v1/<source>/<db_id>/<table>/`.
pub fn name_endpoints(source: &str, db_id: &str, templates: &[&Template]) -> Vec<Endpoint> {
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for t in templates {
        let returns = if t.returns.is_empty() {
            "rows".to_string()
        } else {
            let mut r: Vec<&str> = t.returns.iter().map(String::as_str).take(3).collect();
            r.dedup();
            r.join("_and_")
        };
        let mut by: Vec<String> = Vec::new();
        for p in &t.parameters {
            let base = p
                .name
                .trim_end_matches(|c: char| c.is_ascii_digit() || c == '_')
                .to_string();
            if !by.contains(&base) {
                by.push(base);
            }
        }
        let mut resource = returns.clone();
        if !by.is_empty() {
            resource = format!("{resource}_by_{}", by.join("_and_"));
        }
        if !t.group_by.is_empty() {
            resource = format!("{resource}_per_{}", t.group_by.join("_and_"));
        }
        if !t.order_by.is_empty() {
            resource = format!("{resource}_sorted_by_{}", t.order_by.join("_and_"));
        }
        if let Some(n) = &t.limit {
            resource = format!("{resource}_top_{n}");
        }
        let base = cap(&format!("get_{}_{}", t.table, resource), 56);
        let mut name = base.clone();
        let mut n = 2;
        while used.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        used.insert(name.clone());
        let tail = name
            .strip_prefix(&format!("get_{}_", t.table))
            .unwrap_or(&name)
            .to_string();
        let what = t
            .returns
            .iter()
            .take(3)
            .map(|r| r.replace('_', " "))
            .collect::<Vec<_>>()
            .join(", ");
        let mut summary = format!(
            "Get the {} of {} records",
            if what.is_empty() { "rows".into() } else { what },
            t.table.replace('_', " ")
        );
        if !t.parameters.is_empty() {
            summary.push_str(&format!(
                " filtered by {}",
                t.parameters
                    .iter()
                    .map(|p| p.name.replace('_', " "))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !t.group_by.is_empty() {
            summary.push_str(&format!(", one row per {}", t.group_by.join(", ").replace('_', " ")));
        }
        if !t.order_by.is_empty() {
            let keys: Vec<String> = t
                .order_by
                .iter()
                .map(|k| match k.strip_suffix("_desc") {
                    Some(k) => format!("{} (descending)", k.replace('_', " ")),
                    None => k.replace('_', " "),
                })
                .collect();
            summary.push_str(&format!(", sorted by {}", keys.join(", ")));
        }
        if let Some(n) = &t.limit {
            summary.push_str(&format!(", first {n} only"));
        }
        summary.push('.');
        out.push(Endpoint {
            db_id: db_id.into(),
            name,
            path: format!("/v1/{}/{}/{}/{}", slug(source), db_id, t.table, tail),
            summary,
            sql: t.sql.clone(),
            parameters: t.parameters.clone(),
            ordered: t.ordered,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_and_operation_ids_follow_fastapi() {
        assert_eq!(title("min_age"), "Min Age");
        assert_eq!(title("country_2"), "Country 2");
        assert_eq!(title("v_2x"), "V 2X");
        let ep = Endpoint {
            db_id: "concert_singer".into(),
            name: "get_singer_name".into(),
            path: "/v1/spider/concert_singer/singer/name".into(),
            summary: String::new(),
            sql: String::new(),
            parameters: vec![],
            ordered: false,
        };
        assert_eq!(
            ep.operation_id(),
            "get_singer_name_v1_spider_concert_singer_singer_name_get"
        );
    }

    #[test]
    fn query_validation_reports_every_error_like_fastapi() {
        let p = |n: &str, k: &str| Parameter {
            name: n.into(),
            kind: k.into(),
            description: String::new(),
        };
        let ep = Endpoint {
            db_id: "d".into(),
            name: "f".into(),
            path: "/p".into(),
            summary: String::new(),
            sql: String::new(),
            parameters: vec![p("age", "integer"), p("name", "string"), p("score", "number")],
            ordered: false,
        };
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ep.arguments_from_query(&q(&[("age", "3"), ("name", "x"), ("score", "1.5")]))
                .unwrap(),
            vec![json!(3), json!("x"), json!(1.5)]
        );
        let errs = ep
            .arguments_from_query(&q(&[("age", "abc"), ("score", "1")]))
            .unwrap_err();
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0]["type"], "int_parsing");
        assert_eq!(
            errs[1],
            json!({"type": "missing", "loc": ["query", "name"], "msg": "Field required", "input": null})
        );
    }
}
