//! Numbers from query strings by pydantic v2's lax-mode rules (what FastAPI applies to `int` and
//! `float` query parameters), so the REST server accepts and rejects the same inputs as the
//! FastAPI app its OpenAPI document describes. Checked against pydantic 2.13:
//!
//! | input                        | `int`         | `float`          |
//! |------------------------------|---------------|------------------|
//! | `" 12 "`, `"+5"`, `"00012"`  | 12, 5, 12     | 12.0, 5.0, 12.0  |
//! | `"1_000"`, `"1_0.0"`         | 1000, 10      | 1000.0, 10.0     |
//! | `"1.0"`, `"1.000"`, `"-0.0"` | 1, 1, 0       | 1.0, 1.0, -0.0   |
//! | `"1e3"`, `"1.5"`, `"1."`, `".0"` | rejected | 1000.0, 1.5, 1.0, 0.0 |
//! | `"1__0"`, `"_1"`, `"1_"`, `"0x10"`, `"- 1"`, `""` | rejected | rejected |
//!
//! Integers outside `i64` are accepted as pydantic accepts them (any size) and carried as the
//! nearest `f64` (SQLite stores 64-bit integers; a comparison with the real value orders
//! correctly and matches no stored integer). Deliberate difference: `inf`/`nan` floats are
//! rejected (JSON cannot carry them).

/// Digits with single underscores between them (`1_000`), as Python's numeric literals allow.
fn digits_with_underscores(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('_')
        && !s.ends_with('_')
        && !s.contains("__")
        && s.bytes().all(|b| b.is_ascii_digit() || b == b'_')
}

/// pydantic v2's `int` from a string: surrounding whitespace, an optional sign, digits with
/// single underscores between them, optionally `.` and one or more zeros. `None` is pydantic's
/// `int_parsing` error; a value outside `i64` is a JSON float (module docs).
pub fn int(raw: &str) -> Option<serde_json::Value> {
    let s = raw.trim();
    let (sign, rest) = match s.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", s.strip_prefix('+').unwrap_or(s)),
    };
    let (whole, frac) = match rest.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (rest, None),
    };
    if !digits_with_underscores(whole) || frac.is_some_and(|f| f.is_empty() || f.bytes().any(|b| b != b'0')) {
        return None;
    }
    let digits = format!("{sign}{}", whole.replace('_', ""));
    match digits.parse::<i64>() {
        Ok(i) => Some(i.into()),
        Err(_) => digits.parse::<f64>().ok().filter(|f| f.is_finite()).map(Into::into),
    }
}

/// pydantic v2's `float` from a string: what Rust's `f64` parser takes after surrounding
/// whitespace is trimmed and single underscores between characters are removed; `None` is
/// pydantic's `float_parsing` error (and, deliberately, a non-finite result).
pub fn float(raw: &str) -> Option<f64> {
    let s = raw.trim();
    if s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    s.replace('_', "").parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in the module docs, row by row (pydantic 2.13's answers).
    #[test]
    fn integers_follow_pydantic_v2() {
        let ok = [
            (" 12 ", 12),
            ("+5", 5),
            ("00012", 12),
            ("1_000", 1000),
            ("1_0.0", 10),
            ("1.0", 1),
            ("1.000", 1),
            ("-0.0", 0),
            ("\t7\n", 7),
            ("0_0", 0),
        ];
        for (s, want) in ok {
            assert_eq!(int(s), Some(want.into()), "{s:?}");
        }
        let big = int("-9775457295389224337408").unwrap();
        assert_eq!(big.as_f64(), Some(-9775457295389224337408f64));
        for s in [
            "1e3", "1.5", "1.", ".0", "1__0", "_1", "1_", "0x10", "- 1", "", "+-1", "1._0", "1_0.0_0", "１２",
        ] {
            assert_eq!(int(s), None, "{s:?}");
        }
    }

    #[test]
    fn floats_follow_pydantic_v2() {
        let ok = [
            ("1e3", 1000.0),
            ("1_000.5", 1000.5),
            ("1.", 1.0),
            (".5", 0.5),
            (" 2 ", 2.0),
            ("+.5e-3", 0.0005),
            ("1_0e1_0", 1e11),
        ];
        for (s, want) in ok {
            assert_eq!(float(s), Some(want), "{s:?}");
        }
        for s in ["1__0", "_1", "1_", "0x1p3", "1,5", "", "inf", "nan", "1e400"] {
            assert_eq!(float(s), None, "{s:?}");
        }
    }
}
