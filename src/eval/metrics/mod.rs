//! The papers' metrics, one per function, each over one row (gold calls vs predicted calls);
//! [`crate::eval::score`] averages them over rows.
//!
//! - [`intent`]: Live API-Bench §4.1.1 position-aware intent P/R/F1 and slot P/R/F1 conditional
//!   on the matched intent.
//! - [`blend`]: API-BLEND §5.4 API-F1, Parameter-F1 and LCS-F1 (and our Parameter-F1 by API
//!   beside Parameter-F1), and our exact match (no metric of §5.4).
//! - [`bfcl`]: BFCL's AST check (type coercion and acceptable values) for `bfcl` rows;
//!   [`bfcl_lang`]: Java/JavaScript arguments read from source text as BFCL's converters read
//!   them.
//! - [`irrelevance`]: BFCL's irrelevance check (no gold call: pass when no call is made).
//! - [`labels`]: `$label$` references replaced by the call they are bound to (its name and
//!   resolved arguments: alpha-equivalence), so that renaming labels consistently changes no
//!   score and a reference to a dropped call matches nothing (every metric above runs on
//!   resolved calls).
//! - Completion rate and the DynamicToolBench pass rate execute the prediction:
//!   [`crate::eval::execute`].
//!
//! Conventions shared by every P/R/F1 here: `P = tp / predicted`, `R = tp / gold`,
//! `F1 = 2PR / (P + R)` (0 when `P + R = 0`); when both sides are empty, P = R = F1 = 1; when only
//! one side is empty, P = R = F1 = 0 (each metric says what its "sides" are where that matters:
//! Parameter-F1 and slot on zero-argument calls). Values compare with [`value_eq`].

pub mod bfcl;
pub mod bfcl_lang;
pub mod blend;
pub mod intent;
pub mod irrelevance;
pub mod labels;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Precision, recall and F1 of one row, each in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Prf {
    /// Precision.
    pub p: f64,
    /// Recall.
    pub r: f64,
    /// F1.
    pub f1: f64,
}

impl Prf {
    /// P/R/F1 from counts under the module conventions.
    pub fn from_counts(tp: usize, predicted: usize, gold: usize) -> Prf {
        if predicted == 0 && gold == 0 {
            return Prf {
                p: 1.0,
                r: 1.0,
                f1: 1.0,
            };
        }
        if predicted == 0 || gold == 0 {
            return Prf::default();
        }
        let p = tp as f64 / predicted as f64;
        let r = tp as f64 / gold as f64;
        let f1 = if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) };
        Prf { p, r, f1 }
    }
}

/// Argument value equality: numbers by value (`1 == 1.0`), objects regardless of key order,
/// arrays element by element, everything else exactly.
pub fn value_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| value_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| value_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A canonical text of a value under [`value_eq`] (numbers by value, object keys sorted), for
/// multiset counting.
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    (f as i64).to_string()
                } else {
                    f.to_string()
                }
            }
        },
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let mut kv: Vec<(&String, String)> = m.iter().map(|(k, v)| (k, canonical(v))).collect();
            kv.sort();
            format!(
                "{{{}}}",
                kv.iter()
                    .map(|(k, v)| format!("{}:{v}", Value::String((*k).clone())))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conventions() {
        assert_eq!(Prf::from_counts(0, 0, 0).f1, 1.0);
        assert_eq!(Prf::from_counts(0, 2, 0).f1, 0.0);
        let p = Prf::from_counts(1, 2, 4);
        assert_eq!((p.p, p.r), (0.5, 0.25));
        assert!((p.f1 - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn values_by_value() {
        assert!(value_eq(&json!(1), &json!(1.0)));
        assert!(value_eq(&json!({"a": 1, "b": [2]}), &json!({"b": [2.0], "a": 1})));
        assert!(!value_eq(&json!("1"), &json!(1)));
        assert_eq!(
            canonical(&json!({"b": 1.0, "a": "x"})),
            canonical(&json!({"a": "x", "b": 1}))
        );
    }
}
