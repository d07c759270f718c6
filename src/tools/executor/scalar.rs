//! SQLite's scalar semantics over one cell, for the row-wise `transform_data` operations
//! (`transform.rs`): text read as a number ([`numeric`]), arithmetic and `||` between two cells
//! ([`binary`]), `CAST` ([`cast`]), `ROUND` ([`round`]) and the text functions `LENGTH`,
//! `UPPER`, `LOWER`, `INSTR`, `REPLACE`, `TRIM` ([`text_function`]). NULL in gives NULL out
//! everywhere. The rules are SQLite's (<https://sqlite.org/lang_corefunc.html>,
//! <https://sqlite.org/lang_expr.html#castexpr>), each checked against SQLite itself in the
//! table-driven tests of `scalar/tests.rs`.

use serde_json::{Map, Value as Json};

use super::R;
use super::calculate::arith;
use crate::tools::table::number_text;
use crate::verify::Datum;

/// The longest numeric prefix of `s` after leading spaces, as SQLite reads text in arithmetic
/// (`'12abc'` → 12, `'1.5e2x'` → 150.0, `'abc'` and `''` → 0): an integer when the prefix has
/// neither `.` nor an exponent and fits in 64 bits, else a real.
pub(super) fn numeric(s: &str) -> Datum {
    let b = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0c']).as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - digits_start;
    let mut real = false;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        let mut j = i + 1;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        frac_digits = j - i - 1;
        if int_digits + frac_digits > 0 {
            real = true;
            i = j;
        }
    }
    if int_digits + frac_digits == 0 {
        return Datum::Int(0);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let exp_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start {
            real = true;
            i = j;
        }
    }
    let prefix = std::str::from_utf8(&b[..i]).unwrap_or("0");
    if !real {
        if let Ok(n) = prefix.parse::<i64>() {
            return Datum::Int(n);
        }
    }
    Datum::real(prefix.parse::<f64>().unwrap_or(0.0))
}

/// A cell as a number for arithmetic: numbers as they are, text by [`numeric`], NULL as NULL.
pub(super) fn as_number(d: &Datum) -> Datum {
    match d {
        Datum::Text(s) => numeric(s),
        other => other.clone(),
    }
}

/// A cell as SQLite renders it as text (`CAST(x AS TEXT)`, `||`, the text functions).
pub(super) fn as_text(d: &Datum) -> Option<String> {
    match d {
        Datum::Null => None,
        Datum::Text(t) => Some(t.clone()),
        Datum::Real(r) => Some(real_text(*r)),
        n => number_text(n),
    }
}

/// A real as SQLite prints it (`%!.15g`): 15 significant digits, `.0` on an integral value,
/// exponent form below 1e-4 and from 1e15 (`1.0e+20`).
fn real_text(r: f64) -> String {
    let s = g_format(r, 15);
    match s.split_once('e') {
        Some((m, e)) if !m.contains('.') => format!("{m}.0e{e}"),
        Some(_) => s,
        None if s.contains('.') || !r.is_finite() => s,
        None => format!("{s}.0"),
    }
}

/// C's `%.<precision>g`: `precision` significant digits, trailing zeros dropped, exponent form
/// (`e+XX`) when the exponent is below -4 or at least `precision`.
pub(super) fn g_format(r: f64, precision: usize) -> String {
    if r == 0.0 {
        return "0".into();
    }
    if !r.is_finite() {
        return if r.is_nan() {
            "NaN".into()
        } else if r > 0.0 {
            "Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let e = format!("{:.*e}", precision - 1, r);
    let (mantissa, exp) = e.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent");
    let trim = |t: &str| -> String {
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t.to_string()
        }
    };
    if exp < -4 || exp >= precision as i32 {
        format!("{}e{}{:02}", trim(mantissa), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim(&format!("{r:.decimals$}"))
    }
}

/// `x <op> y` for one row: `add`, `subtract`, `multiply`, `divide` (text operands read by
/// [`numeric`]; integer by integer divides as integers, truncating toward zero; x/0 is NULL;
/// an integer result out of 64 bits is real) or `concat` (SQL's `||`: both as text).
pub(super) fn binary(x: &Datum, y: &Datum, op: &str) -> R<Datum> {
    if matches!(x, Datum::Null) || matches!(y, Datum::Null) {
        return Ok(Datum::Null);
    }
    if op == "concat" {
        return Ok(Datum::Text(format!(
            "{}{}",
            as_text(x).unwrap_or_default(),
            as_text(y).unwrap_or_default()
        )));
    }
    arith(&as_number(x), &as_number(y), op)
}

/// `CAST(x AS <type>)` with `type` `integer` (a real truncated toward zero; text's longest
/// integer prefix, [`integer_prefix`]), `real`, `numeric` (text read by [`numeric`], an integral real kept as an
/// integer) or `text`.
pub(super) fn cast(d: &Datum, to: &str) -> R<Datum> {
    Ok(match (d, to) {
        (Datum::Null, _) => Datum::Null,
        (_, "text") => Datum::Text(as_text(d).unwrap_or_default()),
        (Datum::Text(s), "integer") => integer_prefix(s),
        (Datum::Real(r), "integer") => real_to_int(*r),
        (Datum::Int(i), "real") => Datum::Real(*i as f64),
        (Datum::Text(s), "real") => Datum::real(numeric(s).as_f64().unwrap_or(0.0)),
        (Datum::Text(s), "numeric") => match numeric(s) {
            Datum::Real(r) if r.fract() == 0.0 && r.abs() < 9.2e18 => Datum::Int(r as i64),
            other => other,
        },
        (other, "integer" | "real" | "numeric") => other.clone(),
        (_, other) => return Err(format!("unsupported cast type `{other}`")),
    })
}

/// `CAST(text AS INTEGER)`: the longest integer prefix after leading spaces (`'12.7'` → 12,
/// `'1e3'` → 1, `'abc'` → 0), saturated at the 64-bit bounds.
fn integer_prefix(s: &str) -> Datum {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0c']);
    let b = t.as_bytes();
    let mut i = usize::from(b.first().is_some_and(|c| *c == b'+' || *c == b'-'));
    let start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == start {
        return Datum::Int(0);
    }
    match t[..i].parse::<i64>() {
        Ok(n) => Datum::Int(n),
        Err(_) if b[0] == b'-' => Datum::Int(i64::MIN),
        Err(_) => Datum::Int(i64::MAX),
    }
}

/// A real as an integer: truncated toward zero, saturated at the 64-bit bounds (SQLite's rule).
fn real_to_int(r: f64) -> Datum {
    Datum::Int(r as i64)
}

/// `ROUND(x, digits)`: half away from zero to `digits` decimals (negative as 0, at most 30),
/// always a real; text read by [`numeric`]. SQLite adds 0.5 and truncates for 0 digits
/// (`ROUND(2.5)` is 3.0, `ROUND(-2.5)` -3.0), and otherwise rounds the decimal expansion of
/// the stored binary value at the digit (`%!.*f`), so `ROUND(2.675, 2)` is 2.67: 2.675 is
/// stored as 2.67499999….
pub(super) fn round(d: &Datum, digits: i64) -> Datum {
    let x = match as_number(d) {
        Datum::Null => return Datum::Null,
        n => n.as_f64().unwrap_or(0.0),
    };
    let n = digits.clamp(0, 30) as i32;
    // From 2^52 on a real has no fraction to round.
    if x.abs() > 4_503_599_627_370_496.0 {
        return Datum::Real(x);
    }
    if n == 0 {
        let r = (x.abs() + 0.5).trunc();
        return Datum::Real(if x < 0.0 { -r } else { r });
    }
    Datum::real(round_decimal(x, n))
}

/// `x` rounded half away from zero at `n` decimals, on the decimal expansion of its binary
/// value (31 significant digits), read back.
fn round_decimal(x: f64, n: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let s = format!("{:.30e}", x.abs());
    let (mantissa, exp) = s.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent");
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).map(|c| c - b'0').collect();
    // Digit k of `digits` has weight 10^(exp - k); keep those with weight ≥ 10^-n.
    let keep = exp + n + 1;
    if keep < 0 {
        return 0.0_f64.copysign(x);
    }
    let keep = keep as usize;
    if keep >= digits.len() {
        return x;
    }
    let mut kept: Vec<u8> = digits[..keep].to_vec();
    let mut exp = exp;
    if digits[keep] >= 5 {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                exp += 1;
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    if kept.is_empty() {
        return 0.0_f64.copysign(x);
    }
    let text: String = kept.iter().map(|d| (b'0' + d) as char).collect();
    let value: f64 = format!("{}e{}", text, exp - kept.len() as i32 + 1)
        .parse()
        .unwrap_or(0.0);
    value.copysign(x)
}

/// The text functions over one cell, `args` the operation's arguments: `length` (characters),
/// `upper` / `lower` (ASCII letters only, as SQLite without ICU), `instr {substring}` (1-based
/// position of the first occurrence in characters, 0 when absent), `replace {pattern,
/// replacement}` (every occurrence; an empty pattern changes nothing), `trim {characters,
/// side}` (the characters, default a space, removed from `both` ends, the `left` or the
/// `right`). A number is read as its text; `length` of a number is the length of that text.
pub(super) fn text_function(d: &Datum, op: &str, args: &Map<String, Json>) -> R<Datum> {
    let Some(s) = as_text(d) else {
        return Ok(Datum::Null);
    };
    let text_arg = |name: &str| -> R<String> {
        match args.get(name) {
            Some(Json::String(t)) => Ok(t.clone()),
            Some(Json::Number(n)) => Ok(n.to_string()),
            Some(other) => Err(format!("`{op}` argument `{name}` must be text, got {other}")),
            None => Err(format!("`{op}` needs the argument `{name}`")),
        }
    };
    Ok(match op {
        "length" => Datum::Int(s.chars().count() as i64),
        "upper" => Datum::Text(s.to_ascii_uppercase()),
        "lower" => Datum::Text(s.to_ascii_lowercase()),
        "instr" => {
            let needle = text_arg("substring")?;
            Datum::Int(match s.find(&needle) {
                Some(byte) => s[..byte].chars().count() as i64 + 1,
                None => 0,
            })
        }
        "replace" => {
            let pattern = text_arg("pattern")?;
            let replacement = text_arg("replacement")?;
            if pattern.is_empty() {
                Datum::Text(s)
            } else {
                Datum::Text(s.replace(&pattern, &replacement))
            }
        }
        "trim" => {
            let set: Vec<char> = match args.get("characters") {
                None | Some(Json::Null) => vec![' '],
                Some(_) => text_arg("characters")?.chars().collect(),
            };
            let side = args.get("side").and_then(Json::as_str).unwrap_or("both");
            let strip = |c: char| set.contains(&c);
            Datum::Text(match side {
                "both" => s.trim_matches(strip).to_string(),
                "left" => s.trim_start_matches(strip).to_string(),
                "right" => s.trim_end_matches(strip).to_string(),
                other => return Err(format!("trim side must be both, left or right, got `{other}`")),
            })
        }
        other => return Err(format!("unknown text function `{other}`")),
    })
}

#[cfg(test)]
mod tests;
