//! Berkeley Function Calling Leaderboard (BFCL, `ShishirPatil/gorilla`) `simple` and `multiple`
//! questions with their `possible_answer/` gold, and a lint of that gold against the schemas.
//!
//! Inputs (JSON Lines, one record per line): `BFCL_v4_simple_python.json` and
//! `BFCL_v4_multiple.json` — `{id, question: [[{role, content}]], function: [{name, description,
//! parameters}]}` — and `possible_answer/<same name>` — `{id, ground_truth: [{<function>: {<param>:
//! [acceptable values]}}]}`. In the gold, `""` among the acceptable values means "may be omitted";
//! a nested `dict` value is itself `{<key>: [acceptable values]}`. A line that is not JSON or lacks
//! these fields is a [`BadRecord`] (file, 0-based line index).
//!
//! Schemas: BFCL type names become JSON Schema (`dict`→`object`, `float`→`number`,
//! `tuple`→`array`, `any`→ no `type`; `integer`, `string`, `boolean`, `array` as is; recursively
//! through `properties` and `items`), BFCL's `optional` keyword is dropped, then the generic
//! [`super::schema::normalise`] and [`super::schema::check`] run. Function names become OpenAI names the way
//! BFCL's own OpenAI handler does (`.` → `_`), then [`super::mcp::sanitise_name`].
//!
//! Rows: `input` = the user turn, `output` = one call per gold call: for each gold parameter the
//! first acceptable value that is not `""`, a parameter omitted when it is optional (not
//! `required`) and `""` is acceptable (nested dicts the same way); `tools` = the question's
//! functions; `meta` = `{bfcl_id, category, original_names, acceptable, lint}`. A row whose chosen
//! call does not validate against its schema is dropped (`gold_invalid`), as is a question whose
//! gold names no offered function (`unknown_function`), has no gold (`missing_gold`) or a schema
//! that stays invalid (`invalid_schema`).
//!
//! Lint kinds ([`Finding::kind`]), checked over *every* acceptable value, after BFCL's coercions
//! (an integer is acceptable for `float`; a list for `tuple`; anything for `any`):
//! `unknown_function`, `unknown_parameter`, `missing_required` (a required parameter absent from
//! the gold), `required_may_be_omitted` (`""` acceptable for a required parameter),
//! `enum_violation`, `type_mismatch`, `malformed_gold` (an acceptable-value list that is not a
//! non-empty list).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::schema::{self, Fix};
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::tools::{Call, ToolSpec};

/// The question files read, with the split (BFCL category) they become.
pub const FILES: [(&str, &str); 2] = [
    ("BFCL_v4_simple_python.json", "simple_python"),
    ("BFCL_v4_multiple.json", "multiple"),
];

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// BFCL question id.
    pub id: String,
    /// Kind (see the module doc).
    pub kind: String,
    /// Function as named in the gold.
    pub function: String,
    /// Parameter path (`a`, `a.b`, `a[1]`; `""` for the function itself).
    pub parameter: String,
    /// Detail: the offending value and the schema's expectation.
    pub detail: String,
}

/// The input files under a BFCL root: each question file and its `possible_answer/` twin.
pub fn inputs(root: &Path) -> Vec<PathBuf> {
    FILES
        .iter()
        .flat_map(|(f, _)| [root.join(f), root.join("possible_answer").join(f)])
        .filter(|p| p.is_file())
        .collect()
}

/// Reads JSON Lines: (0-based line number, the line's value or a message for a bad line); blank
/// lines are skipped.
fn read_jsonl(path: &Path) -> Result<Vec<(usize, Result<Value, String>)>, CorpusError> {
    Ok(crate::corpus::json_lines(&crate::corpus::read_text(path)?))
}

/// BFCL's OpenAI-compatible function name: `.` → `_`, then sanitised to `^[a-zA-Z0-9_-]{1,64}$`.
pub fn openai_name(name: &str) -> String {
    super::mcp::sanitise_name(&name.replace('.', "_"))
}

/// A converted function: spec plus the fixes (BFCL type renames included) and the original name.
pub struct Converted {
    /// The tool spec (OpenAI name, JSON Schema parameters).
    pub spec: ToolSpec,
    /// BFCL name.
    pub original: String,
    /// Schema changes made.
    pub fixes: Vec<Fix>,
}

/// Converts one BFCL function; `Err` says why it cannot be used.
pub fn convert_function(f: &Value) -> Result<Converted, String> {
    let name = f.get("name").and_then(Value::as_str).ok_or("function without a name")?;
    let mut params = f
        .get("parameters")
        .cloned()
        .unwrap_or(json!({"type": "dict", "properties": {}}));
    // BFCL declares every function's parameters as `dict`: normalise renames it with the rest.
    let fixes = schema::normalise(&mut params);
    schema::check(&params).map_err(|e| format!("function {name}: {e}"))?;
    Ok(Converted {
        spec: ToolSpec {
            name: openai_name(name),
            description: f.get("description").and_then(Value::as_str).unwrap_or("").to_string(),
            parameters: params,
            output_parameters: json!({}),
        },
        original: name.to_string(),
        fixes,
    })
}

fn type_ok(v: &Value, ty: &str) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        // BFCL: an int is acceptable for a float parameter
        "number" => v.is_number(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn is_omit(v: &Value) -> bool {
    v.as_str() == Some("")
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Lints one gold parameter map against an object schema (`path` prefixes parameter names).
fn lint_object(args: &Map<String, Value>, schema: &Value, path: &str, f: &mut dyn FnMut(&str, String, String)) {
    let props = schema.get("properties").and_then(Value::as_object);
    let required = required_of(schema);
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    for (k, acceptable) in args {
        let p = join(k);
        let Some(prop) = props.and_then(|ps| ps.get(k)) else {
            if props.is_some() || path.is_empty() {
                f(
                    "unknown_parameter",
                    p,
                    format!("not a parameter of the schema (gold {acceptable})"),
                );
            }
            continue;
        };
        let Some(list) = acceptable.as_array().filter(|l| !l.is_empty()) else {
            f(
                "malformed_gold",
                p,
                format!("acceptable values {acceptable} are not a non-empty list"),
            );
            continue;
        };
        if list.iter().any(is_omit) && required.contains(&k.as_str()) {
            f(
                "required_may_be_omitted",
                p.clone(),
                "\"\" (omit) is acceptable for a required parameter".into(),
            );
        }
        for v in list.iter().filter(|v| !is_omit(v)) {
            lint_value(v, prop, &p, f);
        }
    }
    for r in required {
        if !args.contains_key(r) {
            f(
                "missing_required",
                join(r),
                "required parameter absent from the gold".into(),
            );
        }
    }
}

fn lint_value(v: &Value, schema: &Value, path: &str, f: &mut dyn FnMut(&str, String, String)) {
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("any");
    if !type_ok(v, ty) {
        f("type_mismatch", path.into(), format!("{v} is not {ty}"));
        return;
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        f(
            "enum_violation",
            path.into(),
            format!("{v} not in {}", Value::Array(e.clone())),
        );
    }
    match v {
        Value::Object(m) if ty == "object" => {
            // nested dict gold: {key: [acceptable]}; a bare value is checked as the only one
            let wrapped: Map<String, Value> = m
                .iter()
                .map(|(k, x)| (k.clone(), if x.is_array() { x.clone() } else { json!([x]) }))
                .collect();
            lint_object(&wrapped, schema, path, f);
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, x) in items.iter().enumerate() {
                    lint_value(x, item_schema, &format!("{path}[{i}]"), f);
                }
            }
        }
        _ => {}
    }
}

/// The chosen value of an acceptable list (see the module doc): `None` = omit. Dicts, also
/// inside lists, hold acceptable lists per key and are chosen recursively.
fn choose(list: &Value, schema: &Value, required: bool) -> Option<Value> {
    let Value::Array(list) = list else {
        return Some(list.clone());
    };
    if list.iter().any(is_omit) && !required {
        return None;
    }
    let v = list.iter().find(|v| !is_omit(v))?;
    Some(choose_nested(v, schema))
}

fn choose_nested(v: &Value, schema: &Value) -> Value {
    match v {
        Value::Object(m) if schema.get("type").and_then(Value::as_str) == Some("object") => {
            let req = required_of(schema);
            let mut out = Map::new();
            for (k, x) in m {
                let sub = schema.get("properties").and_then(|p| p.get(k)).unwrap_or(&Value::Null);
                let list = if x.is_array() { x.clone() } else { json!([x]) };
                if let Some(c) = choose(&list, sub, req.contains(&k.as_str())) {
                    out.insert(k.clone(), c);
                }
            }
            Value::Object(out)
        }
        // BFCL nests the acceptable-list format in dicts inside lists too (`list_dict_checker`)
        Value::Array(xs) if schema.get("items").is_some() => {
            Value::Array(xs.iter().map(|x| choose_nested(x, &schema["items"])).collect())
        }
        other => other.clone(),
    }
}

/// What the BFCL conversion produced.
#[derive(Default)]
pub struct BfclOutput {
    /// Outcomes per split (`simple_python`, `multiple`).
    pub splits: BTreeMap<String, Outcome>,
    /// Skipped lines.
    pub bad_records: Vec<BadRecord>,
    /// Every lint finding, in file order.
    pub findings: Vec<Finding>,
    /// Distinct functions `(spec, original name)` in first-seen order (same name + same schema once).
    pub functions: Vec<(ToolSpec, String)>,
    /// Schema fixes by kind (BFCL type renames are `type_renamed` / `type_any_removed`).
    pub fixes_by_kind: BTreeMap<String, usize>,
    /// Questions read per split.
    pub questions: BTreeMap<String, usize>,
}

/// Converts and lints every question file found under `root`.
pub fn convert(root: &Path) -> Result<BfclOutput, CorpusError> {
    let mut out = BfclOutput::default();
    let mut seen_fn: BTreeMap<String, usize> = BTreeMap::new();
    for (file, split) in FILES {
        let qpath = root.join(file);
        if !qpath.is_file() {
            continue;
        }
        let apath = root.join("possible_answer").join(file);
        let mut gold: BTreeMap<String, Value> = BTreeMap::new();
        if apath.is_file() {
            for (i, r) in read_jsonl(&apath)? {
                match r.and_then(|v| {
                    let id = v
                        .get("id")
                        .and_then(Value::as_str)
                        .ok_or("gold line without id")?
                        .to_string();
                    let gt = v
                        .get("ground_truth")
                        .filter(|g| g.is_array())
                        .ok_or("gold line without a ground_truth array")?
                        .clone();
                    Ok::<_, String>((id, gt))
                }) {
                    Ok((id, gt)) => {
                        gold.insert(id, gt);
                    }
                    Err(message) => out.bad_records.push(BadRecord {
                        file: format!("possible_answer/{file}"),
                        record: i,
                        message,
                    }),
                }
            }
        }
        let outcome = out.splits.entry(split.to_string()).or_default();
        for (i, r) in read_jsonl(&qpath)? {
            let rec = r.and_then(|v| {
                let id = v
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or("question line without id")?
                    .to_string();
                let funcs = v
                    .get("function")
                    .and_then(Value::as_array)
                    .ok_or("question line without a function array")?
                    .clone();
                let turn = v
                    .get("question")
                    .and_then(|q| q.get(0))
                    .and_then(Value::as_array)
                    .ok_or("question line without question[0] messages")?;
                let text = turn
                    .iter()
                    .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                    .filter_map(|m| m.get("content").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n");
                if text.is_empty() {
                    return Err("question[0] has no user message".into());
                }
                Ok::<_, String>((id, funcs, text))
            });
            let (id, funcs, text) = match rec {
                Ok(x) => x,
                Err(message) => {
                    out.bad_records.push(BadRecord {
                        file: file.into(),
                        record: i,
                        message,
                    });
                    continue;
                }
            };
            *out.questions.entry(split.to_string()).or_insert(0) += 1;
            outcome.attempted += 1;
            let drop = |reason: &str, detail: String| Drop {
                id: id.clone(),
                group: split.to_string(),
                reason: reason.into(),
                detail,
            };
            let mut tools: Vec<Converted> = Vec::new();
            let mut bad_schema = None;
            for f in &funcs {
                match convert_function(f) {
                    Ok(c) => tools.push(c),
                    Err(e) => bad_schema = Some(e),
                }
            }
            if let Some(e) = bad_schema {
                outcome.drops.push(drop("invalid_schema", e));
                continue;
            }
            for c in &tools {
                let key = format!("{}\u{0}{}", c.spec.name, schema::canonical(&c.spec.parameters));
                if !seen_fn.contains_key(&key) {
                    seen_fn.insert(key, out.functions.len());
                    out.functions.push((c.spec.clone(), c.original.clone()));
                    for fx in &c.fixes {
                        *out.fixes_by_kind.entry(fx.kind.clone()).or_insert(0) += 1;
                    }
                }
            }
            let Some(gt) = gold.get(&id) else {
                outcome
                    .drops
                    .push(drop("missing_gold", "no possible_answer line with this id".into()));
                continue;
            };
            // lint
            let mut findings: Vec<Finding> = Vec::new();
            let mut calls = Vec::new();
            let mut unknown = None;
            for call in gt.as_array().into_iter().flatten() {
                let Some((fname, args)) = call.as_object().and_then(|o| o.iter().next()) else {
                    findings.push(Finding {
                        id: id.clone(),
                        kind: "malformed_gold".into(),
                        function: String::new(),
                        parameter: String::new(),
                        detail: format!("gold call {call} is not {{function: {{param: [values]}}}}"),
                    });
                    continue;
                };
                let Some(tool) = tools.iter().find(|t| t.original == *fname) else {
                    findings.push(Finding {
                        id: id.clone(),
                        kind: "unknown_function".into(),
                        function: fname.clone(),
                        parameter: String::new(),
                        detail: format!(
                            "not among the question's functions {:?}",
                            tools.iter().map(|t| t.original.as_str()).collect::<Vec<_>>()
                        ),
                    });
                    unknown = Some(fname.clone());
                    continue;
                };
                let empty = Map::new();
                let args = args.as_object().unwrap_or(&empty);
                lint_object(args, &tool.spec.parameters, "", &mut |kind, parameter, detail| {
                    findings.push(Finding {
                        id: id.clone(),
                        kind: kind.into(),
                        function: fname.clone(),
                        parameter,
                        detail,
                    })
                });
                let req = required_of(&tool.spec.parameters);
                let mut arguments = Map::new();
                for (k, list) in args {
                    let sub = tool
                        .spec
                        .parameters
                        .get("properties")
                        .and_then(|p| p.get(k))
                        .unwrap_or(&Value::Null);
                    if let Some(v) = choose(list, sub, req.contains(&k.as_str())) {
                        arguments.insert(k.clone(), v);
                    }
                }
                calls.push(Call {
                    name: tool.spec.name.clone(),
                    arguments,
                    label: String::new(),
                });
            }
            out.findings.extend(findings.iter().cloned());
            if let Some(f) = unknown {
                outcome.drops.push(drop(
                    "unknown_function",
                    format!("gold calls {f}, which the question does not offer"),
                ));
                continue;
            }
            let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec.clone()).collect();
            let checker = crate::seq::check::Checker::new(&specs).map_err(|message| CorpusError::Malformed {
                path: qpath.clone(),
                message,
            })?;
            if let Some(e) = calls.iter().find_map(|c| checker.validate(c).err()) {
                outcome.drops.push(drop("gold_invalid", e));
                continue;
            }
            let original_names: Map<String, Value> =
                tools.iter().map(|t| (t.spec.name.clone(), json!(t.original))).collect();
            outcome.examples.push(Example {
                id: id.clone(),
                input: text,
                output: calls,
                tools: specs,
                meta: Some(json!({
                    "bfcl_id": id,
                    "category": split,
                    "original_names": original_names,
                    "acceptable": gt,
                    "lint": findings,
                })),
                ..Default::default()
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lint(args: Value, schema: Value) -> Vec<(String, String)> {
        let mut s = schema;
        schema::normalise(&mut s);
        let mut out = Vec::new();
        lint_object(args.as_object().unwrap(), &s, "", &mut |k, p, _| {
            out.push((k.to_string(), p))
        });
        out
    }

    fn pair(k: &str, p: &str) -> (String, String) {
        (k.into(), p.into())
    }

    #[test]
    fn type_names_map_to_json_schema() {
        let c = convert_function(
            &json!({"name": "geo.distance", "parameters": {"type": "dict", "properties": {
            "a": {"type": "tuple", "items": {"type": "float"}}, "b": {"type": "any"},
            "c": {"type": "dict", "properties": {"d": {"type": "integer"}}}}, "required": ["a"]}}),
        )
        .unwrap();
        assert_eq!(c.spec.name, "geo_distance");
        assert_eq!(
            c.spec.parameters,
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}, "b": {},
                "c": {"type": "object", "properties": {"d": {"type": "integer"}}}}, "required": ["a"]})
        );
    }

    #[test]
    fn each_lint_kind() {
        let s = json!({"type": "dict", "properties": {
            "n": {"type": "integer"}, "x": {"type": "float"}, "u": {"type": "string", "enum": ["c", "f"]},
            "d": {"type": "dict", "properties": {"k": {"type": "string"}}}, "l": {"type": "array", "items": {"type": "string"}}},
            "required": ["n", "u"]});
        // int for float is fine (BFCL coercion); "" on an optional parameter is fine
        assert!(lint(json!({"n": [1], "x": [2, 2.5, ""], "u": ["c"]}), s.clone()).is_empty());
        assert_eq!(
            lint(json!({"n": [1], "u": ["c"], "zz": [1]}), s.clone()),
            [pair("unknown_parameter", "zz")]
        );
        assert_eq!(lint(json!({"u": ["c"]}), s.clone()), [pair("missing_required", "n")]);
        assert_eq!(
            lint(json!({"n": [1, ""], "u": ["c"]}), s.clone()),
            [pair("required_may_be_omitted", "n")]
        );
        assert_eq!(
            lint(json!({"n": [1], "u": ["kelvin"]}), s.clone()),
            [pair("enum_violation", "u")]
        );
        assert_eq!(
            lint(json!({"n": [1.5], "u": ["c"]}), s.clone()),
            [pair("type_mismatch", "n")]
        );
        assert_eq!(
            lint(json!({"n": [1], "u": ["c"], "l": [["a", 3]]}), s.clone()),
            [pair("type_mismatch", "l[1]")]
        );
        assert_eq!(
            lint(json!({"n": [1], "u": ["c"], "d": [{"k": [5], "q": ["x"]}]}), s.clone()),
            [pair("type_mismatch", "d.k"), pair("unknown_parameter", "d.q")]
        );
        assert_eq!(lint(json!({"n": 1, "u": ["c"]}), s), [pair("malformed_gold", "n")]);
    }

    #[test]
    fn chosen_values_and_unknown_function_and_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let q = [
            r#"{"id": "simple_python_0", "question": [[{"role": "user", "content": "Area of base 10, height 5?"}]], "function": [{"name": "calc.area", "description": "d", "parameters": {"type": "dict", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}, "unit": {"type": "string"}, "opts": {"type": "dict", "properties": {"round": {"type": "integer"}, "fmt": {"type": "string"}}}}, "required": ["base", "height"]}}]}"#,
            r#"{"id": "simple_python_1", "question": [[{"role": "user", "content": "x"}]], "function": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}]}"#,
            "not json",
        ];
        let a = [
            r#"{"id": "simple_python_0", "ground_truth": [{"calc.area": {"base": [10], "height": [5, 5.0], "unit": ["units", ""], "opts": [{"round": [2], "fmt": ["", "x"]}]}}]}"#,
            r#"{"id": "simple_python_1", "ground_truth": [{"g": {}}]}"#,
        ];
        std::fs::write(dir.path().join(FILES[0].0), q.join("\n")).unwrap();
        std::fs::create_dir(dir.path().join("possible_answer")).unwrap();
        std::fs::write(dir.path().join("possible_answer").join(FILES[0].0), a.join("\n")).unwrap();
        let out = convert(dir.path()).unwrap();
        let o = &out.splits["simple_python"];
        assert_eq!(o.attempted, 2);
        let e = &o.examples[0];
        assert_eq!(e.output[0].name, "calc_area");
        assert_eq!(
            Value::Object(e.output[0].arguments.clone()),
            json!({"base": 10, "height": 5, "opts": {"round": 2}})
        );
        assert_eq!(o.drops[0].reason, "unknown_function");
        assert_eq!(out.bad_records[0].file, FILES[0].0);
        assert_eq!(out.bad_records[0].record, 2);
        let kinds: Vec<_> = out.findings.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["type_mismatch", "unknown_function"]);
    }
}
