//! Answer normalisation and comparison (DESIGN.md, "Verification").
//!
//! An answer is a table: a list of rows, each a list of [`Datum`]s. The gold answer is the result
//! of the gold SQL on SQLite; the candidate is the result of the gold call sequence on the
//! project's own executor. They match when
//! - the row counts are equal, and
//! - the rows are equal as a **multiset**, or in **order** when the SQL has a top-level
//!   `ORDER BY`;
//! - cells compare by value: integers and reals are equal by value (`1 == 1.0`), reals within a
//!   relative tolerance of 1e-9; `NULL`, NaN and a missing value are one value; text is compared
//!   byte for byte.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// One cell of an answer. Serialised as plain JSON (`null`, number, string).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Datum {
    /// SQL NULL (also NaN from a computation).
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A 64-bit float; never NaN (NaN normalises to `Null`).
    Real(f64),
    /// Text; BLOBs are rendered as lowercase hex text.
    Text(String),
}

impl Datum {
    /// A float datum, normalising NaN to `Null`.
    pub fn real(x: f64) -> Datum {
        if x.is_nan() { Datum::Null } else { Datum::Real(x) }
    }

    /// The numeric value of an `Int` or `Real`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Datum::Int(i) => Some(*i as f64),
            Datum::Real(r) => Some(*r),
            _ => None,
        }
    }
}

/// A whole answer: rows of cells.
pub type Answer = Vec<Vec<Datum>>;

/// Relative tolerance for comparing reals.
pub const REL_TOLERANCE: f64 = 1e-9;

/// Whether two cells are equal under the comparison rule in the module docs.
pub fn datum_eq(a: &Datum, b: &Datum) -> bool {
    match (a, b) {
        (Datum::Null, Datum::Null) => true,
        (Datum::Int(x), Datum::Int(y)) => x == y,
        (Datum::Text(x), Datum::Text(y)) => x == y,
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= REL_TOLERANCE * x.abs().max(y.abs()),
            _ => false,
        },
    }
}

/// A total order used to bring both sides of a multiset comparison into the same order:
/// NULL < numbers (by value) < text.
fn datum_order(a: &Datum, b: &Datum) -> Ordering {
    fn rank(d: &Datum) -> u8 {
        match d {
            Datum::Null => 0,
            Datum::Int(_) | Datum::Real(_) => 1,
            Datum::Text(_) => 2,
        }
    }
    match (a, b) {
        (Datum::Text(x), Datum::Text(y)) => x.cmp(y),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => rank(a).cmp(&rank(b)),
        },
    }
}

fn row_order(a: &[Datum], b: &[Datum]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match datum_order(x, y) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

fn rows_eq(a: &[Datum], b: &[Datum]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| datum_eq(x, y))
}

/// Compares a candidate answer with the gold answer; `ordered` when the gold SQL has a
/// top-level `ORDER BY`.
pub fn answers_match(gold: &[Vec<Datum>], candidate: &[Vec<Datum>], ordered: bool) -> bool {
    if gold.len() != candidate.len() {
        return false;
    }
    if ordered {
        return gold.iter().zip(candidate).all(|(g, c)| rows_eq(g, c));
    }
    let mut g: Vec<&Vec<Datum>> = gold.iter().collect();
    let mut c: Vec<&Vec<Datum>> = candidate.iter().collect();
    g.sort_by(|a, b| row_order(a, b));
    c.sort_by(|a, b| row_order(a, b));
    g.iter().zip(&c).all(|(g, c)| rows_eq(g, c))
}

#[cfg(test)]
mod tests {
    use super::Datum::*;
    use super::*;

    #[test]
    fn numbers_compare_by_value() {
        assert!(datum_eq(&Int(1), &Real(1.0)));
        assert!(datum_eq(&Real(0.1 + 0.2), &Real(0.3)));
        assert!(!datum_eq(&Real(1.0), &Real(1.001)));
        assert!(!datum_eq(&Int(1), &Text("1".into())));
        assert!(datum_eq(&Datum::real(f64::NAN), &Null));
    }

    #[test]
    fn multiset_vs_ordered() {
        let gold = vec![vec![Int(1)], vec![Int(2)], vec![Int(2)]];
        let cand = vec![vec![Int(2)], vec![Real(1.0)], vec![Int(2)]];
        assert!(answers_match(&gold, &cand, false));
        assert!(!answers_match(&gold, &cand, true));
        let fewer = vec![vec![Int(1)], vec![Int(2)], vec![Int(1)]];
        assert!(!answers_match(&gold, &fewer, false), "multiplicity matters");
        assert!(!answers_match(&gold, &gold[..2], false));
    }

    #[test]
    fn nulls_sort_and_match() {
        let gold = vec![vec![Null, Text("a".into())], vec![Int(3), Null]];
        let cand = vec![vec![Int(3), Null], vec![Null, Text("a".into())]];
        assert!(answers_match(&gold, &cand, false));
    }
}
