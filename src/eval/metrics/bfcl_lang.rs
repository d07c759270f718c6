//! BFCL's Java and JavaScript argument reading (issue 49 D4): the rules of `bfcl-eval`'s checker
//! (`eval_checker/ast_eval/type_convertor/{java,js}_type_converter.py`, `ast_checker.py`
//! `simple_function_checker`) written here from their behaviour (tested against bfcl-eval itself
//! in `tests/eval_bfcl.rs`), so that a `simple_java` / `simple_javascript` row passes exactly
//! when BFCL's checker passes it.
//!
//! Every argument the model writes is source text (a string; anything else is a type error).
//! It is read by the converter of the parameter's BFCL type (`meta.parameter_types`, written at
//! build time from BFCL's function docs): Java `integer`/`long`/`float`/`double`/`boolean`/
//! `Array`/`ArrayList`/`HashMap` …, JavaScript `integer`/`float`/`Bigint`/`Boolean`/`array`/
//! `dict` …; text a converter does not recognise stays the string it is (then compared by
//! plain equality as BFCL's "variable", so letter case matters: `TRUE` is not `true`); `String`,
//! `any` and `char` stay strings and compare as BFCL's strings do (case- and
//! punctuation-insensitive). The value read is then checked by the Python rules of
//! [`super::bfcl`] against BFCL's own acceptable values (`meta.acceptable_bfcl`). A type whose
//! conversion BFCL does not implement (Java `Set`, `Hashtable`, `Queue`, `Stack`) or does not
//! know raises there; here it fails the call.

use regex::Regex;
use serde_json::{Map, Number, Value};
use std::sync::LazyLock;

use super::bfcl::Py;

/// The language of a BFCL row (`meta.language`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// `simple_java`.
    Java,
    /// `simple_javascript`.
    JavaScript,
}

impl Lang {
    /// From `meta.language` (`java`, `javascript`); `None` for Python rows.
    pub fn of(meta: &Value) -> Option<Lang> {
        match meta["language"].as_str()? {
            "java" => Some(Lang::Java),
            "javascript" => Some(Lang::JavaScript),
            _ => None,
        }
    }
}

/// The Python type BFCL converts a type name to (`JAVA_TYPE_CONVERSION`,
/// `JS_TYPE_CONVERSION`); `None`: unknown (BFCL raises), `Some(None)`: Python `set`.
pub fn converted_type(ty: &str, lang: Lang) -> Option<Option<Py>> {
    let py = match (lang, ty) {
        (Lang::Java, "byte" | "short" | "integer" | "long") => Py::Int,
        (Lang::Java, "float" | "double") => Py::Float,
        (Lang::Java, "boolean") => Py::Bool,
        (Lang::Java, "char" | "String" | "any") => Py::Str,
        (Lang::Java, "Array" | "ArrayList" | "Queue" | "Stack") => Py::List,
        (Lang::Java, "HashMap" | "Hashtable") => Py::Dict,
        (Lang::Java, "Set") => return Some(None),
        (Lang::JavaScript, "String" | "any") => Py::Str,
        (Lang::JavaScript, "integer" | "Bigint") => Py::Int,
        (Lang::JavaScript, "float") => Py::Float,
        (Lang::JavaScript, "Boolean") => Py::Bool,
        (Lang::JavaScript, "dict") => Py::Dict,
        (Lang::JavaScript, "array") => Py::List,
        _ => return None,
    };
    Some(Some(py))
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("a valid pattern")
}

static INT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+$"));
static JAVA_FLOAT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$"));
static JAVA_DOUBLE: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$"));
static JAVA_LONG: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+[lL]$"));
static JS_FLOAT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+(\.\d+)?$"));
static JS_BIGINT: LazyLock<Regex> = LazyLock::new(|| re(r"^-?\d+n$"));
static ARRAYLIST_AS_LIST: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)"));
static ARRAYLIST_ADD: LazyLock<Regex> = LazyLock::new(|| re(r"(?s)new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}"));
static ADD: LazyLock<Regex> = LazyLock::new(|| re(r"add\((.+?)\)"));
static ARRAYLIST_EMPTY: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+ArrayList<\w*>\(\)"));
static ARRAY: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+\w+\[\]\s*\{(.*?)\}"));
static HASHMAP: LazyLock<Regex> = LazyLock::new(|| re(r"(?s)new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}"));
static PUT: LazyLock<Regex> = LazyLock::new(|| re(r#"put\("(.*?)",\s*(.*?)\)"#));
static HASHMAP_EMPTY: LazyLock<Regex> = LazyLock::new(|| re(r"new\s+HashMap<.*?>\s*\(\)"));
static JS_ARRAY_2D: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\))"));
static JS_INNER: LazyLock<Regex> = LazyLock::new(|| re(r"\[(.*?)\]"));
static JS_ARRAY: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:\[(.*?)\]|\bnew\s+Array\((.*?)\))"));
static JS_DICT: LazyLock<Regex> = LazyLock::new(|| re(r"^\{(.*?)\}"));

fn s(x: &str) -> Value {
    Value::String(x.to_string())
}

fn float(x: f64) -> Value {
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// Python's `int(text)` (surrounding whitespace allowed), as an integer value.
fn py_int(text: &str) -> Option<Value> {
    let t = text.trim().replace('_', "");
    t.parse::<i64>().ok().map(|i| Value::Number(i.into()))
}

/// Python's `float(text)`.
fn py_float(text: &str) -> Option<Value> {
    let t = text.trim().replace('_', "");
    let lower = t.to_ascii_lowercase();
    let ok = !t.is_empty()
        && (t
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
            || [
                "inf",
                "+inf",
                "-inf",
                "infinity",
                "+infinity",
                "-infinity",
                "nan",
                "+nan",
                "-nan",
            ]
            .contains(&lower.as_str()));
    if !ok {
        return None;
    }
    t.parse::<f64>().ok().map(float)
}

/// Python's `text[1:-1]`.
fn inner(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 2 {
        return String::new();
    }
    chars[1..chars.len() - 1].iter().collect()
}

/// `parse_java_value`.
fn java_value(text: &str) -> Value {
    if text == "true" {
        return Value::Bool(true);
    }
    if text == "false" {
        return Value::Bool(false);
    }
    if text.len() >= 2 && text.starts_with('"') && text.ends_with('"') {
        return s(&inner(text));
    }
    if JAVA_LONG.is_match(text) {
        return py_int(&text[..text.len() - 1]).unwrap_or_else(|| s(text));
    }
    if JAVA_FLOAT.is_match(text) {
        return py_float(&text[..text.len() - 1]).unwrap_or_else(|| s(text));
    }
    py_int(text).or_else(|| py_float(text)).unwrap_or_else(|| s(text))
}

/// One element of a Java collection read with its declared element type.
fn java_element(text: &str, nested: Option<&str>) -> Result<Value, String> {
    match nested {
        Some("char" | "String") => Ok(s(&inner(text))),
        Some(t) => java(text, t, None),
        None => Ok(java_value(text)),
    }
}

/// `java_type_converter(value, ty, nested)`.
pub fn java(value: &str, ty: &str, nested: Option<&str>) -> Result<Value, String> {
    if converted_type(ty, Lang::Java).is_none() {
        return Err(format!("Unsupported type: {ty}"));
    }
    Ok(match ty {
        "byte" | "short" | "integer" if INT.is_match(value) => py_int(value).unwrap_or_else(|| s(value)),
        "float" if JAVA_FLOAT.is_match(value) => py_float(&value[..value.len() - 1]).unwrap_or_else(|| s(value)),
        "double" if JAVA_DOUBLE.is_match(value) => py_float(value).unwrap_or_else(|| s(value)),
        "long" if JAVA_LONG.is_match(value) => py_int(&value[..value.len() - 1]).unwrap_or_else(|| s(value)),
        "boolean" if value == "true" || value == "false" => Value::Bool(value == "true"),
        "ArrayList" => {
            if let Some(m) = ARRAYLIST_AS_LIST.captures(value) {
                let items = m[1].split(',').map(|e| java_element(e.trim(), nested));
                Value::Array(items.collect::<Result<_, _>>()?)
            } else if let Some(m) = ARRAYLIST_ADD.captures(value) {
                let items = ADD.captures_iter(&m[1]).map(|a| java_element(a[1].trim(), nested));
                Value::Array(items.collect::<Result<_, _>>()?)
            } else if ARRAYLIST_EMPTY.is_match(value) {
                Value::Array(vec![])
            } else {
                s(value)
            }
        }
        "Array" => match ARRAY.captures(value) {
            Some(m) => {
                let items = m[1].split(',').filter(|x| !x.trim().is_empty()).map(|x| match nested {
                    Some(t) => java(x.trim(), t, None),
                    None => Ok(java_value(x.trim())),
                });
                Value::Array(items.collect::<Result<_, _>>()?)
            }
            None => s(value),
        },
        "HashMap" => {
            if let Some(m) = HASHMAP.captures(value) {
                let mut map = Map::new();
                for p in PUT.captures_iter(&m[1]) {
                    map.insert(p[1].to_string(), java_value(p[2].trim()));
                }
                Value::Object(map)
            } else if HASHMAP_EMPTY.is_match(value) {
                Value::Object(Map::new())
            } else {
                s(value)
            }
        }
        "Set" | "Hashtable" | "Queue" | "Stack" => return Err(format!("{ty} conversion is not implemented")),
        _ => s(value),
    })
}

/// `parse_js_value`.
fn js_value(text: &str) -> Value {
    let t = text.trim();
    if t == "true" {
        return Value::Bool(true);
    }
    if t == "false" {
        return Value::Bool(false);
    }
    if t.len() >= 2 && ((t.starts_with('"') && t.ends_with('"')) || (t.starts_with('\'') && t.ends_with('\''))) {
        return s(&inner(t));
    }
    py_int(t).or_else(|| py_float(t)).unwrap_or_else(|| s(t))
}

/// The `(key, value)` pairs of `re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", content)`
/// (the lookahead written out: `regex` has none).
fn js_pairs(content: &str) -> Vec<(String, String)> {
    let c: Vec<char> = content.chars().collect();
    // `(?=[^,]+:)` at `p`: a `:` after at least one character, before any `,`.
    let ahead = |p: usize| -> bool {
        if p >= c.len() || c[p] == ',' {
            return false;
        }
        c[p + 1..].iter().find(|x| matches!(x, ',' | ':')) == Some(&':')
    };
    let mut out = Vec::new();
    let mut start = 0;
    'scan: while start < c.len() {
        let Some(colon) = (start..c.len()).find(|&i| c[i] == ':') else {
            break;
        };
        if colon == start {
            start += 1;
            continue;
        }
        let mut v = colon + 1;
        while v < c.len() && c[v].is_whitespace() {
            v += 1;
        }
        let mut e = v;
        loop {
            if e == c.len() || (e + 1 == c.len() && c[e] == '\n') {
                out.push((c[start..colon].iter().collect(), c[v..e].iter().collect()));
                start = c.len().max(e);
                continue 'scan;
            }
            if c[e] == ',' {
                let mut w = e + 1;
                while w < c.len() && c[w].is_whitespace() {
                    w += 1;
                }
                if ahead(w) {
                    out.push((c[start..colon].iter().collect(), c[v..e].iter().collect()));
                    start = w;
                    continue 'scan;
                }
            }
            if c[e] == '\n' {
                break;
            }
            e += 1;
        }
        start += 1;
    }
    out
}

/// `parse_js_collection(code, ty, nested)`.
fn js_collection(code: &str, ty: &str, nested: Option<&str>) -> Value {
    let code = code.trim();
    if ty == "array" {
        if let Some(m) = JS_ARRAY_2D.find(code) {
            let rows = JS_INNER.captures_iter(m.as_str()).enumerate().map(|(i, a)| {
                let mut row = a[1].trim();
                if i == 0 && row.starts_with('[') {
                    row = &row[1..];
                }
                Value::Array(row.split(',').map(|e| js_value(e.trim())).collect())
            });
            return Value::Array(rows.collect());
        }
        let Some(m) = JS_ARRAY.captures(code) else {
            return s(code);
        };
        let text = m.get(1).or_else(|| m.get(2)).map_or("", |x| x.as_str()).trim();
        let items: Vec<&str> = if text.is_empty() {
            vec![]
        } else {
            text.split(',').collect()
        };
        let read: Result<Vec<Value>, String> = items
            .iter()
            .map(|e| match nested {
                Some(t) => js(e.trim(), t, None),
                None => Ok(js_value(e.trim())),
            })
            .collect();
        return read.map_or_else(|_| s(code), Value::Array);
    }
    if code == "{}" {
        return Value::Object(Map::new());
    }
    let Some(m) = JS_DICT.captures(code) else {
        return s(code);
    };
    let mut map = Map::new();
    for (k, v) in js_pairs(&m[1]) {
        let key = k.trim().trim_matches(|c| c == '\'' || c == '"').to_string();
        let v = v.trim();
        let value = if v.starts_with('[') && v.ends_with(']') {
            js_collection(v, "array", None)
        } else if v.starts_with('{') && v.ends_with('}') {
            js_collection(v, "dict", None)
        } else {
            js_value(v.trim_matches(|c| c == '\'' || c == '"'))
        };
        map.insert(key, value);
    }
    Value::Object(map)
}

/// `js_type_converter(value, ty, nested)`.
pub fn js(value: &str, ty: &str, nested: Option<&str>) -> Result<Value, String> {
    if converted_type(ty, Lang::JavaScript).is_none() {
        return Err(format!("Unsupported type: {ty}"));
    }
    let quoted = value.len() >= 2
        && ((value.starts_with('"') && value.ends_with('"')) || (value.starts_with('\'') && value.ends_with('\'')));
    Ok(match ty {
        "String" if quoted => s(&inner(value)),
        "integer" if INT.is_match(value) => py_int(value).unwrap_or_else(|| s(value)),
        "float" if JS_FLOAT.is_match(value) => py_float(value).unwrap_or_else(|| s(value)),
        "Bigint" if JS_BIGINT.is_match(value) => py_int(&value[..value.len() - 1]).unwrap_or_else(|| s(value)),
        "Boolean" if value == "true" || value == "false" => Value::Bool(value == "true"),
        "dict" | "array" => js_collection(value, ty, nested),
        _ => s(value),
    })
}

/// A model's argument read as BFCL reads it (module docs): the value, BFCL's Python type of the
/// parameter and of its elements (for `Array`/`ArrayList`/`array`); `Err` for a non-string
/// argument (BFCL's `type_error:java` / `type_error:js`) or a type BFCL cannot convert.
pub fn read(value: &Value, ty: &str, items: Option<&str>, lang: Lang) -> Result<(Value, Py, Option<Py>), String> {
    let expected = converted_type(ty, lang)
        .ok_or_else(|| format!("unsupported BFCL type {ty:?}"))?
        .ok_or_else(|| format!("{ty} conversion is not implemented"))?;
    let Value::String(text) = value else {
        return Err(format!("incorrect type: expected String (source text), got {value}"));
    };
    let nested_type = matches!(ty, "Array" | "ArrayList" | "array").then_some(items).flatten();
    let nested = match nested_type {
        Some(t) => Some(
            converted_type(t, lang)
                .ok_or_else(|| format!("unsupported BFCL type {t:?}"))?
                .ok_or_else(|| format!("{t} conversion is not implemented"))?,
        ),
        None if matches!(ty, "Array" | "ArrayList" | "array") => return Err(format!("{ty} without an element type")),
        None => None,
    };
    let converted = match lang {
        Lang::Java => java(text, ty, nested_type)?,
        Lang::JavaScript => js(text, ty, nested_type)?,
    };
    Ok((converted, expected, nested))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The assertions of `java_type_converter.py`'s and `js_type_converter.py`'s own tests.
    #[test]
    fn converters_agree_with_bfcls_own_tests() {
        let j = |v: &str, t: &str| java(v, t, None).unwrap();
        assert_eq!(j("true", "boolean"), json!(true));
        assert_eq!(j("123", "integer"), json!(123));
        assert_eq!(j("-3.14f", "float"), json!(-3.14));
        assert_eq!(j("123L", "long"), json!(123));
        assert_eq!(j("3e-3F", "float"), json!(3e-3));
        assert_eq!(j("abc", "String"), json!("abc"));
        assert_eq!(j("new int[]{1, 2, 3}", "Array"), json!([1, 2, 3]));
        assert_eq!(
            j("new ArrayList<>(Arrays.asList(\"a\", \"b\"))", "ArrayList"),
            json!(["a", "b"])
        );
        assert_eq!(
            j(
                "new HashMap<String, String>() {{ put(\"key\", \"value\"); }}",
                "HashMap"
            ),
            json!({"key": "value"})
        );
        assert_eq!(j("new HashMap<>()", "HashMap"), json!({}));
        assert_eq!(j("new Object[]{1, \"abc\", true}", "Array"), json!([1, "abc", true]));
        assert_eq!(j("TRUE", "boolean"), json!("TRUE"), "not a Java boolean: kept as text");
        assert!(java("x", "Set", None).is_err());
        let k = |v: &str, t: &str| js(v, t, None).unwrap();
        assert_eq!(k("'abc'", "String"), json!("abc"));
        assert_eq!(k("123n", "Bigint"), json!(123));
        assert_eq!(k("[1, 'a', true]", "array"), json!([1, "a", true]));
        assert_eq!(k("[[1, 2], [3, 4]]", "array"), json!([[1, 2], [3, 4]]));
        assert_eq!(
            k("{'key1': 123, 'key2': 'value', 'key3': false}", "dict"),
            json!({"key1": 123, "key2": "value", "key3": false})
        );
        assert_eq!(
            k("{a: 1, b: 'x, y', c: [1, 2]}", "dict"),
            json!({"a": 1, "b": "x, y", "c": [1, 2]})
        );
        assert_eq!(
            js("[\"a\", \"b\"]", "array", Some("String")).unwrap(),
            json!(["a", "b"])
        );
    }
}
