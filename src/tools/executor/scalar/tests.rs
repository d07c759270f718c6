//! Table-driven checks of the row-wise operations against SQLite itself: each value (a SQL
//! literal: NULL, integers, reals, half-way values, number-like and odd text, time values in
//! every format SQLite reads) is given to SQLite's function and to ours; the results must be
//! the same value of the same storage class.

use rusqlite::types::ValueRef;
use serde_json::{Map, Value as Json, json};

use super::*;
use crate::tools::executor::timevalue::{julianday, strftime};

fn sqlite() -> rusqlite::Connection {
    rusqlite::Connection::open_in_memory().unwrap()
}

fn datum(v: ValueRef<'_>) -> Datum {
    match v {
        ValueRef::Null => Datum::Null,
        ValueRef::Integer(i) => Datum::Int(i),
        ValueRef::Real(r) => Datum::Real(r),
        ValueRef::Text(t) => Datum::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(_) => panic!("no blobs here"),
    }
}

/// SQLite's value of `expr` (a SQL expression).
fn eval(conn: &rusqlite::Connection, expr: &str) -> Datum {
    conn.query_row(&format!("SELECT {expr}"), [], |r| Ok(datum(r.get_ref(0)?)))
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn same(a: &Datum, b: &Datum) -> bool {
    match (a, b) {
        (Datum::Real(x), Datum::Real(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

/// Every value of `values` through `ours` and SQLite's `template` (`{}` the value).
fn check(values: &[&str], template: &str, ours: impl Fn(&Datum) -> Datum) {
    let conn = sqlite();
    let mut bad = Vec::new();
    for v in values {
        let cell = eval(&conn, v);
        let want = eval(&conn, &template.replace("{}", v));
        let got = ours(&cell);
        if !same(&got, &want) {
            bad.push(format!("{}: SQLite {want:?}, ours {got:?}", template.replace("{}", v)));
        }
    }
    assert!(bad.is_empty(), "{} differences:\n{}", bad.len(), bad.join("\n"));
}

const NUMBERS: &[&str] = &[
    "NULL",
    "0",
    "1",
    "-1",
    "7",
    "-7",
    "2",
    "3",
    "2.5",
    "-2.5",
    "0.5",
    "-0.5",
    "1.005",
    "2.675",
    "1e20",
    "-0.0",
    "123456789012",
    "9223372036854775807",
    "0.1",
    "1.0",
    "'12'",
    "'12.0'",
    "'12abc'",
    "'12.5abc'",
    "'abc'",
    "''",
    "' 12 '",
    "'1e3'",
    "'-3'",
    "'+4'",
    "'.5'",
    "'5.'",
    "'0x10'",
    "'1e'",
];

#[test]
fn arithmetic_matches_sqlite_for_every_operator_and_storage_class() {
    for (op, sym) in [
        ("add", "+"),
        ("subtract", "-"),
        ("multiply", "*"),
        ("divide", "/"),
        ("concat", "||"),
    ] {
        for right in ["2", "-2", "0", "0.5", "NULL", "'3'", "'x'", "'2.0'"] {
            let conn = sqlite();
            let y = eval(&conn, right);
            check(NUMBERS, &format!("({{}}) {sym} {right}"), |x| {
                binary(x, &y, op).unwrap()
            });
        }
    }
}

#[test]
fn cast_matches_sqlite_for_integer_real_numeric_and_text() {
    for to in ["integer", "real", "numeric", "text"] {
        check(NUMBERS, &format!("CAST({{}} AS {})", to.to_uppercase()), |x| {
            cast(x, to).unwrap()
        });
    }
}

#[test]
fn round_is_half_away_from_zero_like_sqlite() {
    let mut values: Vec<&str> = NUMBERS.to_vec();
    values.extend([
        "0.125",
        "0.375",
        "-0.125",
        "1.45",
        "2.345",
        "99.995",
        "-99.995",
        "0.0049999",
        "1234.5678",
    ]);
    for digits in [0, 1, 2, 3, 5, -1] {
        check(&values, &format!("ROUND({{}}, {digits})"), |x| round(x, digits));
    }
    check(&values, "ROUND({})", |x| round(x, 0));
}

#[test]
fn text_functions_match_sqlite() {
    let mut values: Vec<&str> = NUMBERS.to_vec();
    values.extend([
        "'  padded  '",
        "'xxhixx'",
        "'Ünïcödé straße'",
        "'a_b_a'",
        "'TR009_1'",
        "'hello world'",
    ]);
    let args = |v: Json| -> Map<String, Json> { v.as_object().unwrap().clone() };
    let cases: Vec<(&str, &str, Map<String, Json>)> = vec![
        ("LENGTH({})", "length", Map::new()),
        ("UPPER({})", "upper", Map::new()),
        ("LOWER({})", "lower", Map::new()),
        ("INSTR({}, 'a')", "instr", args(json!({"substring": "a"}))),
        ("INSTR({}, '2')", "instr", args(json!({"substring": "2"}))),
        ("INSTR({}, '')", "instr", args(json!({"substring": ""}))),
        (
            "REPLACE({}, 'a', 'XY')",
            "replace",
            args(json!({"pattern": "a", "replacement": "XY"})),
        ),
        (
            "REPLACE({}, '', 'Z')",
            "replace",
            args(json!({"pattern": "", "replacement": "Z"})),
        ),
        ("TRIM({})", "trim", Map::new()),
        ("TRIM({}, 'x')", "trim", args(json!({"characters": "x"}))),
        ("LTRIM({})", "trim", args(json!({"side": "left"}))),
        (
            "RTRIM({}, 'x ')",
            "trim",
            args(json!({"characters": "x ", "side": "right"})),
        ),
    ];
    for (template, op, a) in cases {
        check(&values, template, |x| text_function(x, op, &a).unwrap());
    }
}

const TIMES: &[&str] = &[
    "NULL",
    "'2020-02-29'",
    "'2019-02-29'",
    "'2021-04-31'",
    "'1999-12-31 23:59:59'",
    "'1999-12-31T23:59'",
    "'2000-01-01 00:00:00.123'",
    "'2000-01-01 00:00:59.9999'",
    "'2012-07-01 12:30:45Z'",
    "'2012-07-01 12:30:45 +05:30'",
    "'2012-07-01 01:30-02:00'",
    "'2012-07-01  10:00'",
    "'2012-07-01x'",
    "'2012-7-1'",
    "'12:34'",
    "'12:34:56.5'",
    "'24:00'",
    "' 2020-01-01'",
    "'2020-01-01 '",
    "'0000-01-01'",
    "'9999-12-31 23:59:59'",
    "'1969-12-31'",
    "'2024-01-01'",
    "'2024-12-30'",
    "'2023-01-01'",
    "'2457000.5'",
    "2457000.5",
    "2457000",
    "'now-ish'",
    "''",
    "'abc'",
    "-1",
    "'1982-11-15'",
    "'1990-05-03 00:00:00.0'",
];

#[test]
fn julianday_matches_sqlite_over_time_value_formats() {
    check(TIMES, "JULIANDAY({})", julianday);
}

#[test]
fn strftime_matches_sqlite_for_every_supported_specifier() {
    for format in [
        "%Y",
        "%m",
        "%d",
        "%H",
        "%M",
        "%S",
        "%f",
        "%j",
        "%w",
        "%W",
        "%J",
        "%s",
        "%Y-%m-%d",
        "%Y-%m-%d %H:%M:%S",
        "%H:%M:%S",
        "100%%",
        "%Q",
    ] {
        check(TIMES, &format!("STRFTIME('{format}', {{}})"), |x| strftime(format, x));
    }
    check(TIMES, "DATE({})", |x| strftime("%Y-%m-%d", x));
    check(TIMES, "DATETIME({})", |x| strftime("%Y-%m-%d %H:%M:%S", x));
    check(TIMES, "TIME({})", |x| strftime("%H:%M:%S", x));
}
