//! Cell semantics every operator shares: JSON values as cells, SQL comparison of a cell with a
//! value (NULL compares with nothing; a numeric string against a number compares as a number, a
//! number against text as text — SQLite affinity), SQL `LIKE`, SQLite's ordering of values
//! (NULL < numbers < text), and the identity rows are grouped and de-duplicated by (numbers by
//! value, text by bytes, NULL one value).

use std::cmp::Ordering;

use arrow_array::{RecordBatch, UInt32Array};
use serde_json::Value as Json;

use super::R;
use crate::tools::table;
use crate::verify::Datum;

pub(super) fn json_to_datum(v: &Json) -> R<Datum> {
    Ok(match v {
        Json::Null => Datum::Null,
        Json::Bool(b) => Datum::Int(*b as i64),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Datum::Int(i),
            None => Datum::real(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Datum::Text(s.clone()),
        other => return Err(format!("value must be a string, number or null, got {other}")),
    })
}

/// SQL ordering of a cell against a comparison value, `None` when the cell is NULL.
pub(super) fn compare(cell: &Datum, value: &Datum) -> Option<Ordering> {
    match (cell, value) {
        (Datum::Null, _) | (_, Datum::Null) => None,
        (Datum::Text(a), Datum::Text(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (Datum::Text(a), n) => Some(a.as_bytes().cmp(table::number_text(n)?.as_bytes())),
        (n, Datum::Text(b)) => match b.trim().parse::<f64>() {
            Ok(y) => n.as_f64()?.partial_cmp(&y),
            Err(_) => Some(Ordering::Less),
        },
        (a, b) => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// SQL ordering of a cell of a column mixing storage classes (numbers and text,
/// `tools::table`'s union columns) against a comparison value. Such a column has numeric
/// affinity, or none, so a numeric literal stays a number and a text cell sorts after every
/// number (SQLite "Datatypes In SQLite" §4.1–§4.2); otherwise as [`compare`].
pub(super) fn compare_stored(cell: &Datum, value: &Datum) -> Option<Ordering> {
    match (cell, value) {
        (Datum::Text(_), Datum::Int(_) | Datum::Real(_)) => Some(Ordering::Greater),
        _ => compare(cell, value),
    }
}

/// How the cells of `column` compare with a value: [`compare_stored`] for a column mixing
/// storage classes, [`compare`] for a column of one type.
pub(super) fn comparison_for(column: &dyn arrow_array::Array) -> fn(&Datum, &Datum) -> Option<Ordering> {
    if mixes_storage_classes(column) {
        compare_stored
    } else {
        compare
    }
}

/// Whether `column` mixes storage classes (numbers and text: `tools::table`'s union columns),
/// whose cells compare by [`compare_stored`].
pub(super) fn mixes_storage_classes(column: &dyn arrow_array::Array) -> bool {
    matches!(column.data_type(), arrow_schema::DataType::Union(..))
}

/// SQL ordering of two cells of one row (`WHERE a.x > b.y`), `None` when either is NULL: numbers
/// by value, text by bytes, and a number against text as numbers when the text reads as one
/// (SQLite applies the numeric column's affinity to the text operand), else the number first.
/// Which of these SQLite applies depends on the columns' declared types, so a build drops rows
/// whose answer depends on it (`sql::gold::affinity_sensitive`).
pub(super) fn compare_cells(a: &Datum, b: &Datum) -> Option<Ordering> {
    let as_number = |t: &str| t.trim().parse::<f64>().ok();
    match (a, b) {
        (Datum::Null, _) | (_, Datum::Null) => None,
        (Datum::Text(x), Datum::Text(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Datum::Text(x), n) => match as_number(x) {
            Some(x) => x.partial_cmp(&n.as_f64()?),
            None => Some(Ordering::Greater),
        },
        (n, Datum::Text(y)) => match as_number(y) {
            Some(y) => n.as_f64()?.partial_cmp(&y),
            None => Some(Ordering::Less),
        },
        (x, y) => x.as_f64()?.partial_cmp(&y.as_f64()?),
    }
}

/// SQL `LIKE` (SQLite's semantics): `%` any run of characters, `_` one character, ASCII letters
/// case-insensitive (other characters exactly), an optional ESCAPE character making the next
/// `%`, `_` or itself literal. Matched in time linear in the text: the pattern is translated to
/// a regular expression of the `regex` crate, whose matching never backtracks (a pattern such as
/// `%a%a%a%a%b` took exponential time in the backtracking matcher this replaces, issue 47 D3).
#[derive(Debug, Clone)]
pub struct Like(regex::Regex);

impl Like {
    /// The matcher of `pattern` with `escape` (SQLite: ESCAPE is one character; a pattern ending
    /// in it is an error).
    pub fn new(pattern: &str, escape: Option<char>) -> Result<Like, String> {
        let mut re = String::with_capacity(pattern.len() * 4 + 8);
        re.push_str("(?s)^");
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            match c {
                e if Some(e) == escape => match chars.next() {
                    Some(lit) => push_literal(&mut re, lit),
                    None => return Err(format!("LIKE pattern {pattern:?} ends with its ESCAPE character")),
                },
                '%' => re.push_str(".*"),
                '_' => re.push('.'),
                c => push_literal(&mut re, c),
            }
        }
        re.push('$');
        regex::RegexBuilder::new(&re)
            .size_limit(64 << 20)
            .build()
            .map(Like)
            .map_err(|e| format!("LIKE pattern too complex: {e}"))
    }

    /// Whether `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

/// `c` as a regex matching itself, an ASCII letter in either case.
fn push_literal(re: &mut String, c: char) {
    if c.is_ascii_alphabetic() {
        re.push('[');
        re.push(c.to_ascii_lowercase());
        re.push(c.to_ascii_uppercase());
        re.push(']');
    } else {
        re.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
    }
}

/// [`Like`] without an ESCAPE character, for one text (a pattern it cannot compile matches
/// nothing).
pub fn like(text: &str, pattern: &str) -> bool {
    Like::new(pattern, None).is_ok_and(|l| l.is_match(text))
}

pub(super) fn cell_text(d: &Datum) -> Option<String> {
    match d {
        Datum::Null => None,
        Datum::Text(t) => Some(t.clone()),
        n => table::number_text(n),
    }
}

pub(super) fn take(t: &RecordBatch, rows: &[u32]) -> R<RecordBatch> {
    let idx = UInt32Array::from(rows.to_vec());
    arrow_select::take::take_record_batch(t, &idx).map_err(|e| e.to_string())
}

pub(super) fn distinct_datums(values: Vec<Datum>) -> Vec<Datum> {
    let mut seen: Vec<Datum> = Vec::new();
    let mut keys = std::collections::HashSet::new();
    for v in values {
        if keys.insert(datum_key(&v)) {
            seen.push(v);
        }
    }
    seen
}

/// A hashable identity for distinct/grouping: numbers by value, text by bytes, NULL one value.
pub(super) fn datum_key(d: &Datum) -> (u8, u64, String) {
    match d {
        Datum::Null => (0, 0, String::new()),
        Datum::Int(i) => (1, (*i as f64).to_bits(), String::new()),
        Datum::Real(r) => (1, (r + 0.0).to_bits(), String::new()),
        Datum::Text(t) => (2, 0, t.clone()),
    }
}

/// SQLite's ordering of values: NULL < numbers < text.
pub(super) fn sql_order(a: &Datum, b: &Datum) -> Ordering {
    match (a, b) {
        (Datum::Null, Datum::Null) => Ordering::Equal,
        (Datum::Null, _) => Ordering::Less,
        (_, Datum::Null) => Ordering::Greater,
        (Datum::Text(x), Datum::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Datum::Text(_), _) => Ordering::Greater,
        (_, Datum::Text(_)) => Ordering::Less,
        (x, y) => x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0)),
    }
}

#[cfg(test)]
mod like_tests {
    use super::*;

    #[test]
    fn like_has_sqlites_semantics() {
        let cases = [
            ("Angela", "an%", true),
            ("Angela", "%GEL_", true),
            ("Angela", "%gel", false),
            ("", "%", true),
            ("", "_", false),
            ("ab", "a_", true),
            ("héllo", "h_llo", true),
            ("HÉLLO", "hé%", false),
            ("50%", "50\\%", false),
            ("a.b", "a.b", true),
            ("axb", "a.b", false),
            ("a\nb", "a_b", true),
        ];
        for (t, p, want) in cases {
            assert_eq!(like(t, p), want, "{t:?} LIKE {p:?}");
        }
        let esc = |t: &str, p: &str| Like::new(p, Some('!')).unwrap().is_match(t);
        assert!(esc("50%", "50!%"));
        assert!(!esc("500", "50!%"));
        assert!(esc("a_b", "a!_b"));
        assert!(!esc("axb", "a!_b"));
        assert!(esc("a!b", "a!!b"));
        assert!(Like::new("ab!", Some('!')).is_err());
    }

    #[test]
    fn like_is_linear_in_the_pattern_repetitions() {
        let text = "a".repeat(4000);
        for k in 1..=12 {
            let pattern = format!("{}b", "%a".repeat(k));
            let started = std::time::Instant::now();
            assert!(!like(&text, &pattern));
            assert!(
                started.elapsed() < std::time::Duration::from_millis(500),
                "k={k}: {:?}",
                started.elapsed()
            );
        }
    }
}
