//! REST endpoints synthesised from gold SQL: definition, naming, argument validation (FastAPI's
//! rules and error shapes) and execution with bound parameters on a read-only connection.
//!
//! An [`Endpoint`] is one `GET` route: `path` `/v1/<source>/<db_id>/<table>/<returns>`, a function
//! `name` (`get_<table>_<returns>[_by_<parameters>]`, at most 64 characters, unique per database),
//! a summary sentence, the parameterised SQL ([`crate::sql::rest`]) and its query parameters.
//! The response body is the result rows as a JSON array of arrays.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};

use self::pydantic::{choice_ok, enum_error, minimum_error, minimum_ok, parse_typed, type_error};
use super::ToolSpec;
use crate::tools::template::Parameter;
use crate::verify::{Answer, Datum};

mod naming;
mod pydantic;

pub use self::naming::{MAX_NAME, fit_segments, fit_words, name_endpoints, qualify_across_databases};

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
    /// The caller's `admit` refused the result's growth to this many bytes
    /// ([`Endpoint::execute_within`]: the live server's memory budget).
    #[error("the result would take {0} bytes, more than the memory budget admits now")]
    NotAdmitted(usize),
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
    /// The OpenAPI operation id: the function name itself (FastAPI's
    /// `@app.get(path, operation_id=name)`), so `functions.json`, OpenAPI and MCP name an
    /// endpoint with one string, unique across the dataset catalog.
    pub fn operation_id(&self) -> String {
        self.name.clone()
    }

    /// The endpoint as a tool (OpenAI function format parameters).
    pub fn tool_spec(&self) -> ToolSpec {
        let props: Map<String, Json> = self
            .parameters
            .iter()
            .map(|p| {
                let mut schema = json!({"type": p.kind, "description": p.description});
                if !p.choices.is_empty() {
                    schema["enum"] = json!(p.choices);
                }
                if let Some(m) = p.minimum {
                    schema["minimum"] = json!(m);
                }
                if let Some(d) = &p.default {
                    schema["default"] = d.clone();
                }
                (p.name.clone(), schema)
            })
            .collect();
        let required: Vec<&str> = self
            .parameters
            .iter()
            .filter(|p| !p.optional)
            .map(|p| p.name.as_str())
            .collect();
        ToolSpec {
            name: self.name.clone(),
            description: format!("{} (GET {})", self.summary, self.path),
            parameters: json!({"type": "object", "properties": props, "required": required}),
            output_parameters: json!({"type": "object", "properties": {"output_0": {"type": "array", "description": "The result rows, each an array of values."}}}),
        }
    }

    /// Validates query-string arguments like FastAPI: non-optional parameters required (an
    /// omitted optional one binds its default, else `NULL`); `integer` and `number` parsed from
    /// text; a string enum checked. Returns the bound values in placeholder order, or every error.
    pub fn arguments_from_query(&self, query: &[(String, String)]) -> Result<Vec<Json>, Vec<ValidationError>> {
        let mut values = Vec::new();
        let mut errors = Vec::new();
        for p in &self.parameters {
            // FastAPI reads the last occurrence of a repeated scalar query parameter.
            let Some(raw) = query.iter().rev().find(|(k, _)| k == &p.name).map(|(_, v)| v) else {
                if p.optional {
                    values.push(p.default.clone().unwrap_or(Json::Null));
                    continue;
                }
                errors
                    .push(json!({"type": "missing", "loc": ["query", p.name], "msg": "Field required", "input": null}));
                continue;
            };
            match parse_typed(&p.kind, raw) {
                Some(v) if !choice_ok(p, &v) => errors.push(enum_error(p, v)),
                Some(v) if !minimum_ok(p, &v) => errors.push(minimum_error(p, json!(raw))),
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
                None | Some(Json::Null) if p.optional => values.push(p.default.clone().unwrap_or(Json::Null)),
                None => errors
                    .push(json!({"type": "missing", "loc": ["query", p.name], "msg": "Field required", "input": null})),
                Some(v) => {
                    let typed = match (p.kind.as_str(), v) {
                        ("string", Json::String(_)) => Some(v.clone()),
                        ("integer", Json::Number(n)) if n.is_i64() => Some(v.clone()),
                        // Beyond i64 (a u64, or an integral number parsed as f64): accepted as
                        // the query string accepts it ([`super::lax::int`], pydantic takes any
                        // size), so HTTP and MCP agree on one value (issue 31 D8).
                        ("integer", Json::Number(n)) => super::lax::int(&match n.as_u64() {
                            Some(u) => u.to_string(),
                            // Rust's `Display` of an f64 is plain digits (serde_json's is `1e21`).
                            None => format!("{}", n.as_f64().unwrap_or(f64::NAN)),
                        }),
                        ("number", Json::Number(_)) => Some(v.clone()),
                        (kind, Json::String(s)) => parse_typed(kind, s),
                        ("string", Json::Number(n)) => Some(json!(n.to_string())),
                        _ => None,
                    };
                    match typed {
                        Some(t) if !choice_ok(p, &t) => errors.push(enum_error(p, t)),
                        Some(t) if !minimum_ok(p, &t) => errors.push(minimum_error(p, v.clone())),
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
        self.execute_within(conn, values, limits, &mut |_| true)
    }

    /// [`Endpoint::execute`], asking `admit` before the answer grows past what it admitted:
    /// with the answer's bytes so far plus the next step's ([`answer_bytes`]; asked again
    /// each time they pass what was admitted, in steps that at least double). `false` stops
    /// the query ([`RunError::NotAdmitted`]), so the answer never holds more than was admitted.
    pub fn execute_within(
        &self,
        conn: &mut rusqlite::Connection,
        values: &[Json],
        limits: Limits,
        admit: &mut dyn FnMut(usize) -> bool,
    ) -> Result<Answer, RunError> {
        let deadline = Instant::now() + limits.timeout;
        conn.progress_handler(1000, Some(move || Instant::now() > deadline))
            .map_err(|e| RunError::Database(e.to_string()))?;
        let conn_ref: &rusqlite::Connection = conn;
        let result = (|| {
            let mut stmt = conn_ref
                .prepare_cached(&self.sql)
                .map_err(|e| RunError::Database(e.to_string()))?;
            let params = values
                .iter()
                .zip(self.parameters.iter().map(Some).chain(std::iter::repeat(None)))
                .map(|(v, p)| match v {
                    Json::Number(n) if n.is_i64() => rusqlite::types::Value::Integer(n.as_i64().unwrap_or_default()),
                    // An `integer` parameter beyond i64 (pydantic accepts any size, see `lax`) binds
                    // saturated to i64: it orders against every stored integer as the real value
                    // does, and SQLite's LIMIT/OFFSET take only integers ("datatype mismatch").
                    Json::Number(n) if p.is_some_and(|p| p.kind == "integer") => {
                        rusqlite::types::Value::Integer(n.as_f64().unwrap_or_default() as i64)
                    }
                    Json::Number(n) => rusqlite::types::Value::Real(n.as_f64().unwrap_or_default()),
                    Json::String(s) => rusqlite::types::Value::Text(s.clone()),
                    _ => rusqlite::types::Value::Null,
                });
            let mut rows = stmt
                .query(rusqlite::params_from_iter(params))
                .map_err(|e| RunError::Database(e.to_string()))?;
            let mut out: Answer = Vec::new();
            // Bytes of the answer so far (the rows' heap, the outer vector at its capacity) and
            // the bytes admitted.
            let (mut rows_bytes, mut admitted) = (0usize, 0usize);
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
                let cells: Vec<Datum> = (0..n)
                    .map(|i| {
                        row.get_ref(i)
                            .map(super::table::datum_from_sqlite)
                            .unwrap_or(Datum::Null)
                    })
                    .collect();
                rows_bytes += row_bytes(&cells);
                let outer = out.len().max(out.capacity()).max(4) * 2;
                let need = rows_bytes + outer * std::mem::size_of::<Vec<Datum>>();
                if need > admitted {
                    let ask = need.max(admitted * 2).max(64 << 10);
                    if !admit(ask) {
                        return Err(RunError::NotAdmitted(need));
                    }
                    admitted = ask;
                }
                out.push(cells);
            }
            Ok(out)
        })();
        let _ = conn.progress_handler(0, None::<fn() -> bool>);
        result
    }
}

/// Bytes one answer row holds on the heap: its cells and their text.
fn row_bytes(cells: &[Datum]) -> usize {
    cells.len() * std::mem::size_of::<Datum>()
        + cells
            .iter()
            .map(|d| match d {
                Datum::Text(t) => t.capacity(),
                _ => 0,
            })
            .sum::<usize>()
}

/// Bytes an answer holds on the heap (its rows, and the outer vector at its capacity): what
/// [`Endpoint::execute_within`] asks `admit` for as it grows.
pub fn answer_bytes(answer: &Answer) -> usize {
    answer.iter().map(|r| row_bytes(r)).sum::<usize>() + answer.capacity() * std::mem::size_of::<Vec<Datum>>()
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
        assert_eq!(ep.operation_id(), "get_singer_name");
    }

    #[test]
    fn query_validation_reports_every_error_like_fastapi() {
        let p = |n: &str, k: &str| Parameter {
            name: n.into(),
            kind: k.into(),
            ..Parameter::default()
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
        // An integer beyond i64 is the same value from the query string and from JSON (MCP).
        for big in ["99999999999999999999", "1180591620717411303424"] {
            let from_query = ep
                .arguments_from_query(&q(&[("age", big), ("name", "x"), ("score", "1.5")]))
                .unwrap();
            let json_args =
                serde_json::from_str::<Map<String, Json>>(&format!(r#"{{"age": {big}, "name": "x", "score": 1.5}}"#))
                    .unwrap();
            assert_eq!(ep.arguments_from_json(&json_args).unwrap(), from_query, "{big}");
        }
        assert_eq!(
            errs[1],
            json!({"type": "missing", "loc": ["query", "name"], "msg": "Field required", "input": null})
        );
    }

    /// `limit` is `Query(ge=0)`: a negative value (which SQLite would read as "no limit") is
    /// pydantic's `greater_than_equal` error from the query string and from JSON alike, and the
    /// tool schema states `minimum: 0` (issue 31 item 3).
    #[test]
    fn negative_limit_is_rejected_like_fastapi_ge_zero() {
        let limit = Parameter {
            name: "limit".into(),
            kind: "integer".into(),
            optional: true,
            default: Some(json!(3)),
            minimum: Some(0),
            ..Parameter::default()
        };
        let ep = Endpoint {
            db_id: "d".into(),
            name: "f".into(),
            path: "/p".into(),
            summary: String::new(),
            sql: String::new(),
            parameters: vec![limit],
            ordered: true,
        };
        let q = |v: &str| vec![("limit".to_string(), v.to_string())];
        assert_eq!(ep.arguments_from_query(&q("0")).unwrap(), vec![json!(0)]);
        assert_eq!(
            ep.arguments_from_query(&q("-1")).unwrap_err(),
            vec![json!({"type": "greater_than_equal", "loc": ["query", "limit"],
                "msg": "Input should be greater than or equal to 0", "input": "-1", "ctx": {"ge": 0}})]
        );
        let args = serde_json::from_str::<Map<String, Json>>(r#"{"limit": -2}"#).unwrap();
        assert_eq!(
            ep.arguments_from_json(&args).unwrap_err()[0]["type"],
            "greater_than_equal"
        );
        assert_eq!(ep.tool_spec().parameters["properties"]["limit"]["minimum"], json!(0));
    }
}
