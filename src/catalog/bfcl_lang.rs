//! BFCL's Java and JavaScript categories (`simple_java`, `simple_javascript`) the way the
//! leaderboard runs them (gorilla `berkeley-function-call-leaderboard/bfcl_eval`: `utils.py`
//! `_func_doc_language_specific_pre_processing`, `constants/type_mappings.py`,
//! `eval_checker/ast_eval/type_convertor/{java,js}_type_converter.py`).
//!
//! - **What the model sees** ([`shown`]): every top-level parameter is a `string`; its BFCL type
//!   moves into its description (`" This is Java long type parameter in string
//!   representation."`, `any`: `" This parameter can be of any type of Java object in string
//!   representation."`), a list's element type likewise (its `items` removed), a JavaScript
//!   `dict`'s property schema as Python's `json.dumps` text (its `properties` removed), and the
//!   function description ends with `" Note that the provided function is in Java 8 SDK
//!   syntax."` / `"… in JavaScript syntax."`.
//! - **The gold** ([`source_text`]): the chosen acceptable value written as the source text BFCL's
//!   type converter reads back to that value: Java `long` `5L`, `float` `3.5f`, `boolean`
//!   `true`, `Array` `new int[]{1, 2}` (elements of a `String`, `char` or `any` array bare: the
//!   converter keeps each element's text as the string), `ArrayList` `new
//!   ArrayList<>(Arrays.asList("a", "b"))`, `HashMap` `new HashMap<String, Object>() {{
//!   put("k", 1); }}`; JavaScript `Bigint` `5n`, arrays `["a", 1]`, dicts `{k: "v"}`; a `String`
//!   or `any` value, and any gold that is already a string (a variable name such as
//!   `mapController`), as it is.
//! - **Lint** ([`unreachable`]): a gold value no text can produce under these rules — a
//!   non-string element in a list whose elements BFCL reads as strings, or a Java type whose
//!   conversion BFCL does not implement (`Set`, `Hashtable`, `Queue`, `Stack`) — is the finding
//!   `unreachable_under_bfcl_types`; the question is kept.
//!
//! For the gold choice and the lint, [`typed`] maps the language's type names to BFCL's Python
//! ones (`constants/type_mappings.py` `GORILLA_TO_OPENAPI`: `long`/`short`/`byte`/`Bigint` →
//! `integer`, `double` → `float`, `String`/`char` → `string`, `Array`/`ArrayList`/`Queue`/
//! `Stack`/`Set` → `array`, `HashMap`/`Hashtable` → `dict`, `Boolean` → `boolean`, `""` →
//! `any`).

use serde_json::{Map, Value, json};

use super::bfcl::Converted;
use super::bfcl_gold::{Finding, choose, is_omit};
use crate::tools::Call;

/// The language a category's functions are written in (BFCL `is_java` / `is_js`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Python 3 (every category but the two below).
    Python,
    /// Java 8 (`simple_java`).
    Java,
    /// JavaScript (`simple_javascript`).
    JavaScript,
}

impl Language {
    /// The `meta.language` label.
    pub fn label(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Java => "java",
            Language::JavaScript => "javascript",
        }
    }
}

/// The language of a category, from its name (module doc).
pub fn language(category: &str) -> Language {
    if category.contains("javascript") {
        Language::JavaScript
    } else if category.contains("java") {
        Language::Java
    } else {
        Language::Python
    }
}

fn ty(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

fn append(v: &mut Value, key: &str, text: &str) {
    let cur = v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    v[key] = Value::String(cur + text);
}

/// Python's `json.dumps` text of a value (`", "` and `": "` separators, ASCII only).
pub fn py_dumps(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, x)| format!("{}: {}", py_str(k), py_dumps(x)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(py_dumps).collect::<Vec<_>>().join(", ")),
        Value::String(s) => py_str(s),
        other => other.to_string(),
    }
}

fn py_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in serde_json::to_string(s).expect("string")[1..]
        .trim_end_matches('"')
        .chars()
    {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out += &format!("\\u{u:04x}");
            }
        }
    }
    out.push('"');
    out
}

/// The function doc as BFCL shows it to the model (module doc); Python functions unchanged.
pub fn shown(f: &Value, lang: Language) -> Value {
    let (hint, lang_name) = match lang {
        Language::Python => return f.clone(),
        Language::Java => (" Note that the provided function is in Java 8 SDK syntax.", "Java"),
        Language::JavaScript => (
            " Note that the provided function is in JavaScript syntax.",
            "JavaScript",
        ),
    };
    let mut f = f.clone();
    append(&mut f, "description", hint);
    if let Some(Value::Object(props)) = f.get_mut("parameters").and_then(|p| p.get_mut("properties")) {
        for value in props.values_mut() {
            let t = ty(value).to_string();
            if t == "any" {
                let text =
                    format!(" This parameter can be of any type of {lang_name} object in string representation.");
                append(value, "description", &text);
            } else {
                let text = format!(" This is {lang_name} {t} type parameter in string representation.");
                append(value, "description", &text);
            }
            let list = match lang {
                Language::Java => t == "ArrayList" || t == "Array",
                _ => t == "array",
            };
            if list {
                let items = value.get("items").map(|i| ty(i).to_string()).unwrap_or_default();
                let text = format!(" The list elements are of type {items}; they are not in string representation.");
                append(value, "description", &text);
                value.as_object_mut().expect("object").remove("items");
            }
            if lang == Language::JavaScript
                && t == "dict"
                && let Some(p) = value.as_object_mut().and_then(|o| o.remove("properties"))
            {
                let text = format!(
                    " The dictionary entries have the following schema; they are not in string representation. {}",
                    py_dumps(&p)
                );
                append(value, "description", &text);
            }
            value["type"] = Value::String("string".into());
        }
    }
    f
}

fn python_type(t: &str) -> &str {
    match t {
        "byte" | "short" | "long" | "Bigint" => "integer",
        "double" => "float",
        "String" | "char" | "Any" => "string",
        "Array" | "ArrayList" | "Queue" | "Stack" | "Set" => "array",
        "HashMap" | "Hashtable" => "dict",
        "Boolean" => "boolean",
        "" => "any",
        other => other,
    }
}

fn typed_schema(v: &mut Value) {
    if let Some(Value::String(t)) = v.get("type") {
        let p = python_type(t).to_string();
        v["type"] = Value::String(p);
    }
    if let Some(items) = v.get_mut("items") {
        typed_schema(items);
    }
    if let Some(Value::Object(props)) = v.get_mut("properties") {
        props.values_mut().for_each(typed_schema);
    }
}

/// The function with its Java/JavaScript type names mapped to BFCL's Python ones (module doc).
pub fn typed(f: &Value) -> Value {
    let mut f = f.clone();
    if let Some(Value::Object(props)) = f.get_mut("parameters").and_then(|p| p.get_mut("properties")) {
        props.values_mut().for_each(typed_schema);
    }
    f
}

fn number_text(v: &Value) -> String {
    v.to_string()
}

/// A Java literal as `parse_java_value` reads it (no declared type).
fn java_value(v: &Value) -> String {
    match v {
        Value::String(s) => serde_json::to_string(s).expect("string"),
        other => other.to_string(),
    }
}

/// A JavaScript literal as `parse_js_value` / `parse_js_collection` read it.
fn js_value(v: &Value) -> String {
    match v {
        Value::String(s) => serde_json::to_string(s).expect("string"),
        Value::Array(a) => format!("[{}]", a.iter().map(js_value).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!("{k}: {}", js_value(x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// Whether BFCL reads each element of a list of this type as its text (module doc).
fn elements_as_text(lang: Language, ty: &str, items: Option<&str>) -> bool {
    match lang {
        Language::Java => matches!(ty, "Array" | "ArrayList") && matches!(items, Some("String" | "any" | "char")),
        Language::JavaScript => ty == "array" && matches!(items, Some("String" | "any")),
        Language::Python => false,
    }
}

fn bare(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The source text of a chosen gold value of BFCL type `ty` (list element type `items`) that
/// BFCL's converter reads back to the value (module doc).
pub fn source_text(v: &Value, ty: &str, items: Option<&str>, lang: Language) -> String {
    if let Value::String(s) = v {
        return s.clone();
    }
    match lang {
        Language::Python => v.to_string(),
        Language::Java => match (ty, v) {
            ("long", Value::Number(_)) => format!("{}L", number_text(v)),
            ("float", Value::Number(_)) => format!("{}f", number_text(v)),
            ("Array", Value::Array(a)) => {
                let el = match items {
                    Some("String") => "String",
                    Some("integer") => "int",
                    Some(t @ ("char" | "long" | "double" | "float" | "boolean" | "byte" | "short")) => t,
                    _ => "Object",
                };
                let parts: Vec<String> = a
                    .iter()
                    .map(|x| match items {
                        _ if elements_as_text(lang, ty, items) => bare(x),
                        Some(t) => source_text(x, t, None, lang),
                        None => java_value(x),
                    })
                    .collect();
                format!("new {el}[]{{{}}}", parts.join(", "))
            }
            ("ArrayList", Value::Array(a)) if a.is_empty() => "new ArrayList<>()".into(),
            ("ArrayList", Value::Array(a)) => {
                let parts: Vec<String> = a
                    .iter()
                    .map(|x| match items {
                        Some("String") => java_value(&Value::String(bare(x))),
                        Some("char") => format!("'{}'", bare(x)),
                        Some("any") => bare(x),
                        Some(t) => source_text(x, t, None, lang),
                        None => java_value(x),
                    })
                    .collect();
                format!("new ArrayList<>(Arrays.asList({}))", parts.join(", "))
            }
            ("HashMap", Value::Object(m)) if m.is_empty() => "new HashMap<>()".into(),
            ("HashMap", Value::Object(m)) => {
                let puts: String = m
                    .iter()
                    .map(|(k, x)| format!(" put({}, {});", java_value(&Value::String(k.clone())), java_value(x)))
                    .collect();
                format!("new HashMap<String, Object>() {{{{{puts} }}}}")
            }
            _ => java_value(v),
        },
        Language::JavaScript => match (ty, v) {
            ("Bigint", Value::Number(_)) => format!("{}n", number_text(v)),
            _ => js_value(v),
        },
    }
}

/// Why no source text produces the chosen gold value under BFCL's rules, if none does (module doc).
pub fn unreachable(v: &Value, ty: &str, items: Option<&str>, lang: Language) -> Option<String> {
    if lang == Language::Java && matches!(ty, "Set" | "Hashtable" | "Queue" | "Stack") && !v.is_string() {
        return Some(format!("BFCL's Java type converter does not implement {ty}"));
    }
    if elements_as_text(lang, ty, items)
        && let Some(x) = v.as_array().and_then(|a| a.iter().find(|x| !x.is_string()))
    {
        return Some(format!(
            "BFCL reads every element of a {ty} of {} as a string; the gold holds {x}",
            items.unwrap_or("")
        ));
    }
    None
}

/// The BFCL type and list element type of each top-level parameter of a function.
pub fn parameter_types(f: &Value) -> Map<String, Value> {
    f.get("parameters")
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(k, p)| {
                    let items = p.get("items").map(|i| ty(i).to_string());
                    (k.clone(), json!([ty(p), items]))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Java/JavaScript gold as BFCL's converter reads it (the module doc): each chosen call
/// argument rewritten as source text, and the acceptable values as the texts of each acceptable
/// value (omission markers kept), which the returned `acceptable` holds; a value no text can
/// produce is an `unreachable_under_bfcl_types` finding, and a string gold is no `type_mismatch`
/// (source text: a name is a value of any type).
pub(super) fn gold_as_source_text(
    id: &str,
    gt: &Value,
    funcs: &[Value],
    typed_tools: &[Converted],
    lang: Language,
    calls: &mut [Call],
    findings: &mut Vec<Finding>,
) -> Value {
    let types_of = |original: &str| {
        funcs
            .iter()
            .find(|f| f.get("name").and_then(Value::as_str) == Some(original))
            .map(parameter_types)
            .unwrap_or_default()
    };
    let type_of = |types: &Map<String, Value>, k: &str| -> (String, Option<String>) {
        let t = &types[k];
        (
            t[0].as_str().unwrap_or("").to_string(),
            t[1].as_str().map(str::to_string),
        )
    };
    for call in calls.iter_mut() {
        let Some(tool) = typed_tools.iter().find(|t| t.spec.name == call.name) else {
            continue;
        };
        let types = types_of(&tool.original);
        for (k, v) in call.arguments.iter_mut() {
            if !types.contains_key(k) {
                continue;
            }
            let (ty, items) = type_of(&types, k);
            if let Some(detail) = unreachable(v, &ty, items.as_deref(), lang) {
                findings.push(Finding {
                    id: id.to_string(),
                    kind: "unreachable_under_bfcl_types".into(),
                    function: tool.original.clone(),
                    parameter: k.clone(),
                    detail,
                });
            }
            *v = Value::String(source_text(v, &ty, items.as_deref(), lang));
        }
    }
    // Java/JavaScript values are source text: a name (a variable such as `mapController`, a
    // constant such as `ResultSet.CONCUR_READ_ONLY`) is a value of any type, so a string gold
    // is no type mismatch (BFCL's checker reads the text back as that string)
    findings.retain(|f| !(f.kind == "type_mismatch" && f.detail.starts_with('"')));
    let mut out = gt.clone();
    for call in out.as_array_mut().into_iter().flatten() {
        let Some((fname, args)) = call.as_object_mut().and_then(|o| o.iter_mut().next()) else {
            continue;
        };
        let types = types_of(fname);
        let tool = typed_tools.iter().find(|t| t.original == *fname);
        for (k, list) in args.as_object_mut().into_iter().flatten() {
            let (Some(tool), true, Value::Array(values)) = (tool, types.contains_key(k), &mut *list) else {
                continue;
            };
            let (ty, items) = type_of(&types, k);
            let sub = tool.spec.parameters["properties"]
                .get(k)
                .cloned()
                .unwrap_or(Value::Null);
            for v in values.iter_mut().filter(|v| !is_omit(v)) {
                let chosen = choose(&json!([v.clone()]), &sub, true).unwrap_or(Value::Null);
                *v = Value::String(source_text(&chosen, &ty, items.as_deref(), lang));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The values of `java_type_converter.py`'s own tests, written back as text.
    #[test]
    fn java_and_js_source_text() {
        let j = |v: Value, t: &str, i: Option<&str>| source_text(&v, t, i, Language::Java);
        assert_eq!(j(json!(123), "long", None), "123L");
        assert_eq!(j(json!(3.14), "float", None), "3.14f");
        assert_eq!(j(json!(true), "boolean", None), "true");
        assert_eq!(j(json!([1, 2, 3]), "Array", Some("integer")), "new int[]{1, 2, 3}");
        assert_eq!(j(json!(["a", "b"]), "Array", Some("String")), "new String[]{a, b}");
        assert_eq!(
            j(json!(["a", "b"]), "ArrayList", Some("String")),
            r#"new ArrayList<>(Arrays.asList("a", "b"))"#
        );
        assert_eq!(
            j(json!({"key1": 1, "key2": "v"}), "HashMap", None),
            r#"new HashMap<String, Object>() {{ put("key1", 1); put("key2", "v"); }}"#
        );
        assert_eq!(j(json!("mapController"), "any", None), "mapController");
        let s = |v: Value, t: &str, i: Option<&str>| source_text(&v, t, i, Language::JavaScript);
        assert_eq!(s(json!(5), "Bigint", None), "5n");
        assert_eq!(s(json!(["a", 2]), "array", None), r#"["a", 2]"#);
        assert_eq!(s(json!({"k": "v", "n": [1]}), "dict", None), r#"{k: "v", n: [1]}"#);
        assert!(unreachable(&json!(["a", 42]), "ArrayList", Some("any"), Language::Java).is_some());
        assert!(unreachable(&json!(["a"]), "ArrayList", Some("any"), Language::Java).is_none());
    }

    #[test]
    fn shown_types_are_strings_with_bfcls_hints() {
        let f = json!({"name": "f", "description": "D.", "parameters": {"type": "dict", "properties": {
            "a": {"type": "long", "description": "A."}, "b": {"type": "ArrayList", "description": "B.", "items": {"type": "String"}},
            "c": {"type": "any", "description": "C."}}}});
        let s = shown(&f, Language::Java);
        assert_eq!(
            s["description"],
            "D. Note that the provided function is in Java 8 SDK syntax."
        );
        assert_eq!(
            s["parameters"]["properties"]["b"],
            json!({"type": "string", "description": "B. This is Java ArrayList type parameter in string representation. The list elements are of type String; they are not in string representation."})
        );
        assert_eq!(s["parameters"]["properties"]["a"]["type"], "string");
        assert!(
            s["parameters"]["properties"]["c"]["description"]
                .as_str()
                .unwrap()
                .ends_with("any type of Java object in string representation.")
        );
        assert_eq!(py_dumps(&json!({"a": {"t": "é"}})), r#"{"a": {"t": "\u00e9"}}"#);
    }
}
