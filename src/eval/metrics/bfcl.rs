//! BFCL's AST check (gorilla `berkeley-function-call-leaderboard`, `eval_checker/ast_eval`),
//! re-implemented from its documented rules for Python-language categories, so that a row's
//! pass/fail equals BFCL's own checker on the same prediction (cross-checked in
//! `tests/eval_bfcl.rs` against PyPI `bfcl-eval`).
//!
//! Inputs: the row's tools (our JSON Schema; BFCL type names map back as `string`→str,
//! `integer`→int, `number`→float, `boolean`→bool, `array`→list (BFCL `array`/`tuple`),
//! `object`→dict, no `type`→str (BFCL `any`)), `meta.acceptable` (BFCL's `ground_truth`:
//! `[{<function>: {<param>: [acceptable values]}}]`, `""` = may be omitted), `meta.category`
//! and `meta.original_names` (OpenAI name → BFCL name).
//!
//! Rules, per call (BFCL's `simple_function_checker`):
//! 1. the function name must be the gold function's (OpenAI form, `.` → `_`);
//! 2. every `required` parameter present; every given parameter declared *and* in the gold;
//! 3. type: the value's Python type must be the declared one — an int is accepted for a float
//!    (and compared as a float); a value of the type of the gold's first non-`""` acceptable
//!    value is accepted as a "variable" (then compared by plain equality); list items are
//!    type-checked one level deep;
//! 4. value: strings (and the strings in a list or dict) compare after removing ` ,./-_*^`,
//!    lower-casing and `'` → `"`; a dict must match one acceptable dict key by key; a list of
//!    dicts element by element; anything else by Python equality (`1 == 1.0 == True`);
//! 5. a gold parameter absent from the call must have `""` among its acceptable values.
//!
//! Java/JavaScript rows (`meta.language`, with `meta.parameter_types` and `meta.acceptable_bfcl`):
//! each argument is source text read by BFCL's converter of its BFCL type
//! ([`super::bfcl_lang`]), then checked by the rules above against BFCL's own acceptable values.
//!
//! Categories: `simple*` exactly one call; `multiple*` as many calls as the gold, the first
//! checked against the gold's function; `parallel*` as many calls as the gold, matched in any
//! order (each gold call takes the first unmatched call that passes).

use std::borrow::Borrow;

use serde_json::{Map, Value};

use super::bfcl_lang::Lang;
use crate::tools::{Call, ToolSpec};

/// Python's type of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Py {
    /// `None`.
    None,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `float`.
    Float,
    /// `str`.
    Str,
    /// `list`.
    List,
    /// `dict`.
    Dict,
}

fn py_type(v: &Value) -> Py {
    match v {
        Value::Null => Py::None,
        Value::Bool(_) => Py::Bool,
        Value::Number(n) if n.is_f64() => Py::Float,
        Value::Number(_) => Py::Int,
        Value::String(_) => Py::Str,
        Value::Array(_) => Py::List,
        Value::Object(_) => Py::Dict,
    }
}

/// The Python type BFCL expects for a JSON Schema type name (module docs).
fn expected_type(schema: &Value) -> Py {
    match schema["type"].as_str() {
        Some("integer") => Py::Int,
        Some("number") => Py::Float,
        Some("boolean") => Py::Bool,
        Some("array") => Py::List,
        Some("object") => Py::Dict,
        _ => Py::Str,
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(*b as u8 as f64),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Python `==` on JSON values (`1 == 1.0 == True`).
fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => x.as_f64() == y.as_f64(),
        (Value::Number(x), Value::Number(y)) => x.as_i128() == y.as_i128(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| py_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

fn py_in(v: &Value, list: &[Value]) -> bool {
    list.iter().any(|x| py_eq(v, x))
}

/// BFCL's string standardisation: drop ` ,./-_*^`, lower-case, `'` → `"`.
pub fn standardize(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect::<String>()
        .to_lowercase()
        .replace('\'', "\"")
}

fn std_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(standardize(s)),
        other => other.clone(),
    }
}

fn as_list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

fn is_empty_marker(v: &Value) -> bool {
    v.as_str() == Some("")
}

/// (valid, is_variable) of BFCL's `type_checker`.
fn type_check(value: &Value, possible: &[Value], expected: Py, nested: Option<Py>) -> (bool, bool) {
    let answer_type = possible.iter().find(|a| !is_empty_marker(a)).map(py_type);
    let is_variable = answer_type.is_some_and(|t| t != expected);
    if py_type(value) == expected {
        let Some(nested) = nested else {
            return (true, is_variable);
        };
        let items = as_list(value);
        for item in possible {
            let ok = match item {
                Value::Array(p) => items.iter().all(|v| type_check(v, p, nested, None).0),
                _ => true,
            };
            if ok {
                return (true, is_variable);
            }
        }
        return (false, is_variable);
    }
    if answer_type.is_some_and(|t| py_type(value) == t) {
        return (true, true);
    }
    (false, is_variable)
}

fn string_check(value: &str, possible: &[Value]) -> bool {
    let v = standardize(value);
    possible.iter().filter_map(Value::as_str).any(|p| standardize(p) == v)
}

fn list_check(value: &[Value], possible: &[Value]) -> bool {
    let model = Value::Array(value.iter().map(std_value).collect());
    possible.iter().any(|p| {
        let p = match p {
            Value::Array(items) => items.iter().map(std_value).collect(),
            // Python iterates a string's characters (`""` is the empty list).
            Value::String(s) => s.chars().map(|c| Value::String(standardize(&c.to_string()))).collect(),
            _ => return false,
        };
        py_eq(&model, &Value::Array(p))
    })
}

fn dict_check(value: &Map<String, Value>, possibles: &[Value]) -> bool {
    possibles.iter().filter(|p| !is_empty_marker(p)).any(|p| {
        let Some(p) = p.as_object() else { return false };
        value.iter().all(|(k, v)| {
            p.get(k).is_some_and(|acc| {
                let acc: Vec<Value> = as_list(acc).iter().map(std_value).collect();
                py_in(&std_value(v), &acc)
            })
        }) && p
            .iter()
            .all(|(k, acc)| value.contains_key(k) || as_list(acc).iter().any(is_empty_marker))
    })
}

fn list_dict_check(value: &[Value], possibles: &[Value]) -> bool {
    possibles.iter().any(|p| {
        let p = match p {
            Value::Array(items) => items.clone(),
            Value::String(s) if s.is_empty() => vec![],
            _ => return false,
        };
        p.len() == value.len()
            && value.iter().zip(&p).all(|(v, acc)| match v.as_object() {
                Some(m) => dict_check(m, std::slice::from_ref(acc)),
                None => false,
            })
    })
}

/// How a call's arguments are typed: by the spec's JSON Schema (Python rows), or read from source
/// text by BFCL's Java/JavaScript converters with the BFCL types of the function's parameters
/// (`param → [type, element type]`; [`super::bfcl_lang`]).
#[derive(Debug, Clone, Copy)]
pub enum Typing<'a> {
    /// The spec's JSON Schema types.
    Python,
    /// BFCL's converters for this language and parameter types.
    Lang(Lang, &'a Map<String, Value>),
}

/// Checks one call against one gold call `{<bfcl name>: {<param>: [values]}}` with `spec` the
/// gold function's spec and `gold_name` its OpenAI name. `Err` says why it fails.
pub fn check_call(spec: &ToolSpec, call: &Call, gold_name: &str, gold: &Map<String, Value>) -> Result<(), String> {
    check_call_typed(spec, call, gold_name, gold, Typing::Python)
}

/// [`check_call`] with the arguments typed by `typing`.
pub fn check_call_typed(
    spec: &ToolSpec,
    call: &Call,
    gold_name: &str,
    gold: &Map<String, Value>,
    typing: Typing,
) -> Result<(), String> {
    if call.name != gold_name {
        return Err(format!("wrong function name {:?} (expected {gold_name:?})", call.name));
    }
    let props = spec.parameters["properties"].as_object().cloned().unwrap_or_default();
    for r in spec.parameters["required"].as_array().into_iter().flatten() {
        let r = r.as_str().unwrap_or_default();
        if !call.arguments.contains_key(r) {
            return Err(format!("missing required parameter {r:?}"));
        }
    }
    for (param, value) in &call.arguments {
        let (Some(schema), Some(possible)) = (props.get(param), gold.get(param)) else {
            return Err(format!("unexpected parameter {param:?}"));
        };
        let possible = as_list(possible);
        let (mut value, expected, nested) = match typing {
            Typing::Python => {
                let expected = expected_type(schema);
                (
                    value.clone(),
                    expected,
                    (expected == Py::List).then(|| expected_type(&schema["items"])),
                )
            }
            Typing::Lang(lang, types) => {
                let t = types.get(param).unwrap_or(&Value::Null);
                let (ty, items) = (t[0].as_str().unwrap_or("any"), t[1].as_str());
                super::bfcl_lang::read(value, ty, items, lang).map_err(|e| format!("parameter {param:?}: {e}"))?
            }
        };
        if matches!(typing, Typing::Python) && expected == Py::Float && py_type(&value) == Py::Int {
            value = serde_json::Number::from_f64(value.as_f64().unwrap_or_default())
                .map(Value::Number)
                .unwrap_or(value);
        }
        let (ok, is_variable) = type_check(&value, &possible, expected, nested);
        if !ok {
            return Err(format!("incorrect type for parameter {param:?}: {value}"));
        }
        let valid = if is_variable {
            py_in(&value, &possible)
        } else {
            match (expected, &value) {
                (Py::Dict, Value::Object(m)) => dict_check(m, &possible),
                (Py::List, Value::Array(items)) if nested == Some(Py::Dict) => list_dict_check(items, &possible),
                (Py::Str, Value::String(s)) => string_check(s, &possible),
                (Py::List, Value::Array(items)) => list_check(items, &possible),
                _ => py_in(&value, &possible),
            }
        };
        if !valid {
            return Err(format!("invalid value for parameter {param:?}: {value}"));
        }
    }
    for (param, acc) in gold {
        if !call.arguments.contains_key(param) && !as_list(acc).iter().any(is_empty_marker) {
            return Err(format!("gold parameter {param:?} not given and not optional"));
        }
    }
    Ok(())
}

/// Whether a row is a BFCL row (its `meta` holds `acceptable`).
pub fn is_bfcl(meta: &Value) -> bool {
    meta["acceptable"].is_array()
}

/// BFCL's AST check of a row (module docs): `None` for a row that is not a BFCL row or has no
/// gold call (see [`super::irrelevance`]); `Some(Err(why))` on failure.
pub fn ast_check<T: Borrow<ToolSpec>>(tools: &[T], meta: &Value, pred: &[Call]) -> Option<Result<(), String>> {
    // Java/JavaScript rows built with their BFCL parameter types: BFCL's own acceptable values,
    // the model's source text read by BFCL's converters ([`super::bfcl_lang`]).
    let lang = Lang::of(meta).filter(|_| meta["parameter_types"].is_object() && meta["acceptable_bfcl"].is_array());
    let acceptable = match lang {
        Some(_) => meta["acceptable_bfcl"].as_array()?,
        None => meta["acceptable"].as_array()?,
    };
    if acceptable.is_empty() {
        return None;
    }
    let category = meta["category"].as_str().unwrap_or("simple");
    let openai_of = |bfcl: &str| -> String {
        meta["original_names"]
            .as_object()
            .and_then(|m| m.iter().find(|(_, v)| v.as_str() == Some(bfcl)).map(|(k, _)| k.clone()))
            .unwrap_or_else(|| crate::catalog::bfcl::openai_name(bfcl))
    };
    let gold: Vec<(String, Map<String, Value>)> = acceptable
        .iter()
        .filter_map(|g| {
            g.as_object()?
                .iter()
                .next()
                .map(|(k, v)| (openai_of(k), v.as_object().cloned().unwrap_or_default()))
        })
        .collect();
    let spec_of = |name: &str| tools.iter().map(Borrow::borrow).find(|t: &&ToolSpec| t.name == name);
    let empty = Map::new();
    let check = |spec: Option<&ToolSpec>, call: &Call, (name, args): &(String, Map<String, Value>)| match spec {
        Some(s) => {
            let typing = match lang {
                Some(l) => Typing::Lang(l, meta["parameter_types"][name].as_object().unwrap_or(&empty)),
                None => Typing::Python,
            };
            check_call_typed(s, call, name, args, typing)
        }
        None => Err(format!("gold function {name:?} is not offered")),
    };
    if pred.len() != gold.len() || (!category.contains("parallel") && !category.contains("multiple") && pred.len() != 1)
    {
        return Some(Err(format!(
            "wrong number of functions: {} (expected {})",
            pred.len(),
            gold.len()
        )));
    }
    Some(if category.contains("parallel") {
        let mut used = vec![false; pred.len()];
        let mut result = Ok(());
        for g in &gold {
            let spec = spec_of(&g.0);
            let hit = (0..pred.len()).find(|&i| !used[i] && check(spec, &pred[i], g).is_ok());
            match hit {
                Some(i) => used[i] = true,
                None => {
                    result = Err(format!("no call matches gold call {:?}", g.0));
                    break;
                }
            }
        }
        result
    } else if category.contains("multiple") {
        check(spec_of(&gold[0].0), &pred[0], &gold[0])
    } else {
        check(tools.first().map(Borrow::borrow), &pred[0], &gold[0])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "calc_area".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {
                "base": {"type": "integer"}, "h": {"type": "number"}, "unit": {"type": "string"},
                "xs": {"type": "array", "items": {"type": "string"}}, "o": {"type": "object"}},
                "required": ["base"]}),
            output_parameters: Value::Null,
        }
    }

    fn call(args: Value) -> Call {
        Call {
            name: "calc_area".into(),
            arguments: args.as_object().unwrap().clone(),
            label: String::new(),
        }
    }

    #[test]
    fn coercion_and_acceptable_values() {
        let gold = json!({"base": [10], "h": [5.0], "unit": ["square meters", ""], "xs": [["A b", "c"], ""], "o": ["", {"k": ["v"]}]});
        let g = gold.as_object().unwrap();
        let ok = |a: Value| check_call(&spec(), &call(a), "calc_area", g).is_ok();
        assert!(ok(json!({"base": 10, "h": 5})), "int accepted for float");
        assert!(
            ok(json!({"base": 10, "h": 5.0, "unit": "Square-Meters"})),
            "string standardised"
        );
        assert!(ok(json!({"base": 10, "h": 5, "xs": ["a_B", "c"]})));
        assert!(ok(json!({"base": 10, "h": 5, "o": {"k": "V"}})));
        assert!(!ok(json!({"base": 10.0, "h": 5})), "float for int is a type error");
        assert!(!ok(json!({"base": 10})), "h not optional");
        assert!(!ok(json!({"base": 10, "h": 5, "zz": 1})), "unexpected parameter");
        assert!(!ok(json!({"h": 5})), "missing required");
        assert!(!ok(json!({"base": 11, "h": 5})));
        assert!(!ok(json!({"base": 10, "h": 5, "o": {"q": "v"}})));
    }
}
