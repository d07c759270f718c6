//! Answer normalisation and comparison (DESIGN.md, "Verification").
//!
//! An answer is a table: a list of rows, each a list of [`Datum`]s. The gold answer is the result
//! of the gold SQL on SQLite; the candidate is the result of the gold call sequence on the
//! project's own executor. They match when
//! - the row counts are equal, and
//! - the rows are equal as a **multiset**, or in **order** when the SQL has a top-level
//!   `ORDER BY` — where rows tied on the ORDER BY keys may come in any order among themselves:
//!   the gold answer's *tie runs* (sizes of the runs of consecutive rows with equal keys, summing
//!   to the row count) are compared run by run as multisets;
//! - cells compare by value: integers and reals are equal by value (`1 == 1.0`), reals within a
//!   relative tolerance of 1e-9; `NULL`, NaN and a missing value are one value; text is compared
//!   byte for byte.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// One cell of an answer. Serialised as plain JSON (`null`, number, string); read back by the
/// same rule (a number that fits an `i64` is an `Int`, any other number a `Real`).
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Reads what an untagged `Datum` would (`null`, a number, a string), straight from the
/// deserializer's events: an untagged enum buffers each cell and tries the variants in turn,
/// building an error for each miss (a merge reads every gold answer of a build: issue 34).
impl<'de> Deserialize<'de> for Datum {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Datum, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Datum;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an answer cell: null, a number or a string")
            }
            fn visit_unit<E>(self) -> Result<Datum, E> {
                Ok(Datum::Null)
            }
            fn visit_none<E>(self) -> Result<Datum, E> {
                Ok(Datum::Null)
            }
            fn visit_i64<E>(self, v: i64) -> Result<Datum, E> {
                Ok(Datum::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Datum, E> {
                Ok(i64::try_from(v).map_or(Datum::Real(v as f64), Datum::Int))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Datum, E> {
                Ok(Datum::Real(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Datum, E> {
                Ok(Datum::Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Datum, E> {
                Ok(Datum::Text(v))
            }
        }
        d.deserialize_any(V)
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
/// top-level `ORDER BY` (strict order: no tie runs known).
pub fn answers_match(gold: &[Vec<Datum>], candidate: &[Vec<Datum>], ordered: bool) -> bool {
    compare(gold, candidate, ordered, None).is_ok()
}

/// [`compare`] as a yes/no.
pub fn answers_match_ties(
    gold: &[Vec<Datum>],
    candidate: &[Vec<Datum>],
    ordered: bool,
    ties: Option<&[usize]>,
) -> bool {
    compare(gold, candidate, ordered, ties).is_ok()
}

fn multiset_eq(gold: &[Vec<Datum>], candidate: &[Vec<Datum>]) -> bool {
    if gold.len() != candidate.len() {
        return false;
    }
    let mut g: Vec<&Vec<Datum>> = gold.iter().collect();
    let mut c: Vec<&Vec<Datum>> = candidate.iter().collect();
    g.sort_by(|a, b| row_order(a, b));
    c.sort_by(|a, b| row_order(a, b));
    g.iter().zip(&c).all(|(g, c)| rows_eq(g, c))
}

fn row_text(row: &[Datum]) -> String {
    serde_json::to_string(row).unwrap_or_default()
}

/// The first row of `a` (as a multiset) with no partner in `b`.
fn first_unmatched<'r>(a: &'r [Vec<Datum>], b: &[Vec<Datum>]) -> Option<&'r Vec<Datum>> {
    let mut used = vec![false; b.len()];
    a.iter()
        .find(|row| match (0..b.len()).find(|&j| !used[j] && rows_eq(row, &b[j])) {
            Some(j) => {
                used[j] = true;
                false
            }
            None => true,
        })
}

/// Compares a candidate answer with the gold answer (rule in the module docs). `ties` are the
/// gold answer's tie runs when ordered (`None`: every run has one row). The error says what
/// differs, for a drop detail: the row counts, a value (the first gold row the candidate lacks,
/// or the first extra candidate row), or only the order (the first differing position).
pub fn compare(
    gold: &[Vec<Datum>],
    candidate: &[Vec<Datum>],
    ordered: bool,
    ties: Option<&[usize]>,
) -> Result<(), String> {
    if !multiset_eq(gold, candidate) {
        let what = match (first_unmatched(gold, candidate), first_unmatched(candidate, gold)) {
            (Some(g), _) => format!("first gold row missing from the calls' answer: {}", row_text(g)),
            (None, Some(c)) => format!("first calls' row not in the gold answer: {}", row_text(c)),
            (None, None) => "values differ".to_string(),
        };
        return Err(format!(
            "values differ (gold {} rows, calls {} rows); {what}",
            gold.len(),
            candidate.len()
        ));
    }
    if !ordered {
        return Ok(());
    }
    let one = vec![1; gold.len()];
    let runs = ties.filter(|t| t.iter().sum::<usize>() == gold.len()).unwrap_or(&one);
    let mut start = 0;
    for &n in runs {
        let (g, c) = (&gold[start..start + n], &candidate[start..start + n]);
        if !multiset_eq(g, c) {
            let i = (0..n).find(|&i| !rows_eq(&g[i], &c[i])).unwrap_or(0) + start;
            return Err(format!(
                "same rows, different order: first differing position {i}: gold {}, calls {}",
                row_text(&gold[i]),
                row_text(&candidate[i])
            ));
        }
        start += n;
    }
    Ok(())
}

/// The sizes of the runs of consecutive rows whose `keys` are equal (cell rule above): the tie
/// runs of an ordered answer whose ORDER BY key values are `keys` (one entry per row).
pub fn tie_runs(keys: &[Vec<Datum>]) -> Vec<usize> {
    let mut runs: Vec<usize> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        match runs.last_mut() {
            Some(n) if i > 0 && rows_eq(&keys[i - 1], k) => *n += 1,
            _ => runs.push(1),
        }
    }
    runs
}

/// Why a gold answer proves little, if it does: any call chain that filters everything away or
/// computes nothing reproduces it. `Some(detail)` for an empty answer (`"empty"`), a single 0,
/// a single NULL, or an answer whose cells are all NULL.
pub fn degenerate(gold: &[Vec<Datum>]) -> Option<&'static str> {
    if gold.is_empty() {
        return Some("empty");
    }
    if let [row] = gold {
        if let [cell] = row.as_slice() {
            if cell.as_f64() == Some(0.0) {
                return Some("a single 0");
            }
            if matches!(cell, Datum::Null) {
                return Some("a single NULL");
            }
        }
    }
    if gold.iter().all(|r| r.iter().all(|c| matches!(c, Datum::Null))) {
        return Some("every cell NULL");
    }
    None
}

/// The tie runs a row records in `meta.order_ties` (absent: strict order).
pub fn ties_from_meta(meta: Option<&serde_json::Value>) -> Option<Vec<usize>> {
    serde_json::from_value(meta?.get("order_ties")?.clone()).ok()
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
    fn ties_may_come_in_any_order_within_their_run() {
        let gold = vec![vec![Int(3)], vec![Int(2)], vec![Int(1)]];
        let swapped = vec![vec![Int(2)], vec![Int(3)], vec![Int(1)]];
        assert!(!answers_match(&gold, &swapped, true));
        assert!(answers_match_ties(&gold, &swapped, true, Some(&[2, 1])));
        assert!(!answers_match_ties(&gold, &swapped, true, Some(&[1, 2])));
        let err = compare(&gold, &swapped, true, None).unwrap_err();
        assert!(
            err.starts_with("same rows, different order: first differing position 0"),
            "{err}"
        );
        let err = compare(&gold, &gold[..2], false, None).unwrap_err();
        assert!(
            err.contains("values differ (gold 3 rows, calls 2 rows)") && err.contains("[1]"),
            "{err}"
        );
        assert_eq!(
            tie_runs(&[vec![Int(1)], vec![Real(1.0)], vec![Null], vec![Null]]),
            vec![2, 2]
        );
    }

    #[test]
    fn degenerate_answers_are_named() {
        assert_eq!(degenerate(&[]), Some("empty"));
        assert_eq!(degenerate(&[vec![Int(0)]]), Some("a single 0"));
        assert_eq!(degenerate(&[vec![Null]]), Some("a single NULL"));
        assert_eq!(
            degenerate(&[vec![Null, Null], vec![Null, Null]]),
            Some("every cell NULL")
        );
        assert_eq!(degenerate(&[vec![Int(0)], vec![Int(0)]]), None);
        assert_eq!(degenerate(&[vec![Int(0), Null]]), None);
    }

    #[test]
    fn nulls_sort_and_match() {
        let gold = vec![vec![Null, Text("a".into())], vec![Int(3), Null]];
        let cand = vec![vec![Int(3), Null], vec![Null, Text("a".into())]];
        assert!(answers_match(&gold, &cand, false));
    }

    #[test]
    fn a_cell_reads_back_as_the_untagged_enum_reads_it() {
        // The judge: serde's own untagged reading of the same variants.
        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(untagged)]
        enum Untagged {
            Null,
            Int(i64),
            Real(f64),
            Text(String),
        }
        let texts = [
            "null",
            "0",
            "-0",
            "1",
            "-1",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "18446744073709551615",
            "1.0",
            "-0.0",
            "1e3",
            "2.5E-7",
            "1.7976931348623157e308",
            "\"\"",
            "\"a\\\"b\\u00e9\"",
            "true",
            "false",
            "[]",
            "[1]",
            "{}",
            "{\"a\":1}",
        ];
        for text in texts {
            let ours = serde_json::from_str::<Datum>(text).ok();
            let judge = serde_json::from_str::<Untagged>(text).ok().map(|u| match u {
                Untagged::Null => Datum::Null,
                Untagged::Int(i) => Datum::Int(i),
                Untagged::Real(r) => Datum::Real(r),
                Untagged::Text(t) => Datum::Text(t),
            });
            assert_eq!(format!("{ours:?}"), format!("{judge:?}"), "{text}");
            // Through a JSON value too (answers read from parsed rows).
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::from_value::<Datum>(value).ok(), ours, "{text} as a value");
        }
    }
}
