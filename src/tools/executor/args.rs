//! Argument access for the tools: named arguments, `$LABEL$` resolution to earlier outputs,
//! and column lookup by name (exact, then ASCII case-insensitive, as the reference tools).

use std::collections::HashMap;

use arrow_array::{ArrayRef, RecordBatch};
use serde_json::Value as Json;

use super::{R, Value};
use crate::tools::as_label_ref;

/// Argument access with label resolution.
pub(super) struct Args<'a> {
    pub(super) map: &'a serde_json::Map<String, Json>,
    pub(super) env: &'a HashMap<String, Value>,
}

impl Args<'_> {
    pub(super) fn json(&self, name: &str) -> R<&Json> {
        self.map.get(name).ok_or_else(|| format!("missing argument `{name}`"))
    }
    pub(super) fn opt(&self, name: &str) -> Option<&Json> {
        self.map.get(name).filter(|v| !v.is_null())
    }
    pub(super) fn str(&self, name: &str) -> R<&str> {
        self.json(name)?
            .as_str()
            .ok_or_else(|| format!("argument `{name}` must be a string"))
    }
    pub(super) fn bool_or(&self, name: &str, default: bool) -> R<bool> {
        match self.opt(name) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| format!("argument `{name}` must be a boolean")),
        }
    }
    pub(super) fn limit(&self) -> R<Option<usize>> {
        match self.opt("limit") {
            None => Ok(None),
            // An integral JSON number is an integer (`-1.0`), as JSON Schema's `integer` holds.
            Some(v) => match v.as_i64().or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            }) {
                Some(n) if n < 0 => Ok(None),
                Some(n) => Ok(Some(n as usize)),
                None => Err("argument `limit` must be an integer (-1 for no limit)".into()),
            },
        }
    }
    /// `offset` (SQL's OFFSET: the values skipped before a `limit`), 0 when absent; a
    /// non-negative integer (integral JSON numbers accepted, as for `limit`).
    pub(super) fn offset(&self) -> R<usize> {
        match self.opt("offset") {
            None | Some(Json::Null) => Ok(0),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| f.fract() == 0.0 && (0.0..9.0e15).contains(f))
                        .map(|f| f as u64)
                })
                .map(|n| n as usize)
                .ok_or_else(|| "argument `offset` must be a non-negative integer".into()),
        }
    }

    pub(super) fn value(&self, name: &str) -> R<&Value> {
        let v = self.json(name)?;
        let label = as_label_ref(v).ok_or_else(|| format!("argument `{name}` must be a $LABEL$ reference"))?;
        self.env
            .get(label)
            .ok_or_else(|| format!("argument `{name}`: no earlier output labelled `{label}`"))
    }
    pub(super) fn table(&self, name: &str) -> R<&RecordBatch> {
        match self.value(name)? {
            Value::Table(t) => Ok(t),
            other => Err(format!("argument `{name}` must be a table, got {}", kind(other))),
        }
    }
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Table(_) => "a table",
        Value::Grouped(_) => "a grouped table",
        Value::Column(_) => "a list",
        Value::Scalar(_) => "a single value",
    }
}

/// Finds a column by name: exact match first, then ASCII case-insensitive (as the reference).
pub(super) fn column<'t>(t: &'t RecordBatch, key: &str) -> R<(usize, &'t ArrayRef)> {
    let schema = t.schema();
    let idx = schema
        .index_of(key)
        .ok()
        .or_else(|| schema.fields().iter().position(|f| f.name().eq_ignore_ascii_case(key)))
        .ok_or_else(|| format!("no column `{key}`"))?;
    Ok((idx, t.column(idx)))
}
