//! Berkeley Function Calling Leaderboard (BFCL, `ShishirPatil/gorilla`
//! `berkeley-function-call-leaderboard/bfcl_eval/data`) single-turn categories with their
//! `possible_answer/` gold, and a lint of that gold against the schemas ([`super::bfcl_gold`]).
//!
//! Inputs: every `BFCL_v4_<category>.json` directly under the root (JSON Lines: `{id, question:
//! [[{role, content}]], function: [{name, description, parameters}]}`) and its twin
//! `possible_answer/BFCL_v4_<category>.json` (`{id, ground_truth: [{<function>: {<param>:
//! [acceptable values]}}]}`). The category — and the split the rows go to — is the file name
//! without `BFCL_v4_` and `.json`, so a file is read under its official name, whatever the
//! category. What each category becomes ([`kind`]):
//!
//! - AST categories (`simple_python`, `simple_java`, `simple_javascript`, `multiple`, `parallel`,
//!   `parallel_multiple`, `live_simple`, `live_multiple`, `live_parallel`,
//!   `live_parallel_multiple`, and any other category with a `possible_answer` file): one call
//!   per gold call, all of them, in the gold's order; Java and JavaScript functions as BFCL
//!   shows them to the model (every parameter a string) and their gold as source text
//!   ([`super::bfcl_lang`]), `meta.language`, BFCL's own gold `meta.acceptable_bfcl` and each
//!   function's BFCL parameter types `meta.parameter_types` (`{name: {param: [type, element
//!   type]}}`: what `eval`'s AST check reads the model's source text by);
//! - no-call categories (`irrelevance`, `live_irrelevance`: no function fits, the right answer is
//!   no call; BFCL has no gold file for them): `output` = `[]`, `meta.expected` = `"no_call"`;
//! - any-call categories (`live_relevance`: some function fits and BFCL passes any call, there
//!   is no reference call): `output` = `[]`, `meta.expected` = `"any_call"`;
//! - categories read but not converted, named in `stats.files_skipped` (the build summary) with
//!   the reason: `multi_turn_*`, `memory`, `web_search`, `format_sensitivity` (multi-turn /
//!   agentic formats).
//!
//! Every row has `ordered: false`: BFCL's checker matches a parallel answer against the gold as
//! an unordered set (`parallel_function_checker_no_order`), and a single call has no order;
//! rows with several calls also say `meta.call_order` = `"any"`. A question line that is not
//! JSON or lacks these fields is a [`BadRecord`] (file, 0-based line index).
//!
//! Schemas: BFCL type names become JSON Schema (`dict`→`object`, `float`→`number`,
//! `tuple`→`array`, `any`→ no `type`; recursively), BFCL's `optional` keyword is dropped, an
//! `enum` on an array moves to its items, then the generic [`super::schema::normalise`] and
//! [`super::schema::check`] run. Function names become OpenAI names the way BFCL's own OpenAI
//! handler does (`.` → `_`), then [`super::mcp::sanitise_name`].
//!
//! Rows: `input` = the user messages of the question's turn; `meta` = `{bfcl_id, category,
//! system (the turn's system messages, when there are any), messages (the turn as BFCL gives
//! it, system prompt included), original_names, acceptable, lint}`. Every official question
//! with a usable gold is kept, so category sizes equal the leaderboard's: a row whose chosen
//! call does not validate against its schema (a lint finding of BFCL's own data, e.g. an integer
//! gold for a `float` parameter) is kept with the validation error in `meta.gold_invalid` beside
//! its `meta.lint` findings (counted in `stats.gold_invalid_kept`). Dropped are only a question
//! whose gold names no offered function (`unknown_function`), has no gold in an AST category
//! (`missing_gold`), more than one turn (`multi_turn`), or a schema that stays invalid
//! (`invalid_schema`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::bfcl_gold::{Finding, choose, lint_object, required_of};
use super::bfcl_lang::{self, Language};
use super::schema::{self, Fix};
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::tools::{Call, ToolSpec};

/// The official file-name prefix of a category file.
pub const PREFIX: &str = "BFCL_v4_";

/// What a category becomes (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Gold calls from `possible_answer/`.
    Ast,
    /// The right answer is no call.
    NoCall,
    /// Any call is right (relevance): no reference call.
    AnyCall,
    /// Not converted, with the reason.
    Skipped(&'static str),
}

/// The kind of a category (module doc).
pub fn kind(category: &str) -> Kind {
    match category {
        c if c.ends_with("irrelevance") => Kind::NoCall,
        c if c.ends_with("relevance") => Kind::AnyCall,
        c if c.starts_with("multi_turn") || c == "memory" || c == "web_search" || c == "format_sensitivity" => {
            Kind::Skipped("multi-turn / agentic format")
        }
        _ => Kind::Ast,
    }
}

/// One category file found under the root.
#[derive(Debug, Clone, PartialEq)]
pub struct CategoryFile {
    /// Category (= split), from the file name.
    pub category: String,
    /// File name (`BFCL_v4_<category>.json`).
    pub name: String,
    /// The question file.
    pub questions: PathBuf,
    /// `possible_answer/<name>`, when it exists.
    pub answers: Option<PathBuf>,
}

/// Every `BFCL_v4_*.json` directly under `root`, sorted by name.
pub fn category_files(root: &Path) -> Vec<CategoryFile> {
    let mut out: Vec<CategoryFile> = std::fs::read_dir(root)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.is_file())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let category = name.strip_prefix(PREFIX)?.strip_suffix(".json")?.to_string();
            if category.is_empty() {
                return None;
            }
            let answers = Some(root.join("possible_answer").join(&name)).filter(|a| a.is_file());
            Some(CategoryFile {
                category,
                name,
                questions: p,
                answers,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The input files under a BFCL root: each converted category's question file and its
/// `possible_answer/` twin (skipped categories are not read, so not hashed).
pub fn inputs(root: &Path) -> Vec<PathBuf> {
    category_files(root)
        .into_iter()
        .filter(|f| !matches!(kind(&f.category), Kind::Skipped(_)))
        .flat_map(|f| std::iter::once(f.questions).chain(f.answers))
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

/// What the BFCL conversion produced.
#[derive(Default)]
pub struct BfclOutput {
    /// Outcomes per split (= category).
    pub splits: BTreeMap<String, Outcome>,
    /// Skipped lines.
    pub bad_records: Vec<BadRecord>,
    /// Every lint finding, in file order.
    pub findings: Vec<Finding>,
    /// Distinct functions `(spec, original name)` in first-seen order (same name + same schema once).
    pub functions: Vec<(ToolSpec, String)>,
    /// Schema fixes by kind (BFCL type renames are `type_renamed` / `type_any_removed`).
    pub fixes_by_kind: BTreeMap<String, usize>,
    /// Questions read per category.
    pub questions: BTreeMap<String, usize>,
    /// Category files found but not converted: file name → reason.
    pub files_skipped: BTreeMap<String, String>,
    /// Questions whose id does not start with `<category>_` (a renamed file), per category.
    pub id_category_mismatch: BTreeMap<String, usize>,
    /// Kept questions whose chosen gold call fails its schema (`meta.gold_invalid`), per category.
    pub gold_invalid_kept: BTreeMap<String, usize>,
}

/// One question line's fields.
struct Question {
    id: String,
    funcs: Vec<Value>,
    turns: usize,
    messages: Value,
    user: String,
    system: String,
}

fn parse_question(v: &Value) -> Result<Question, String> {
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
    let question = v
        .get("question")
        .and_then(Value::as_array)
        .ok_or("question line without a question array")?;
    let turn = question
        .first()
        .and_then(Value::as_array)
        .ok_or("question line without question[0] messages")?;
    let text = |role: &str| {
        turn.iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
            .filter_map(|m| m.get("content").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let user = text("user");
    if user.is_empty() {
        return Err("question[0] has no user message".into());
    }
    Ok(Question {
        id,
        funcs,
        turns: question.len(),
        messages: Value::Array(turn.clone()),
        user,
        system: text("system"),
    })
}

fn read_gold(file: &CategoryFile, out: &mut BfclOutput) -> Result<BTreeMap<String, Value>, CorpusError> {
    let mut gold = BTreeMap::new();
    let Some(apath) = &file.answers else {
        return Ok(gold);
    };
    for (i, r) in read_jsonl(apath)? {
        let parsed = r.and_then(|v| {
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
        });
        match parsed {
            Ok((id, gt)) => {
                gold.insert(id, gt);
            }
            Err(message) => out.bad_records.push(BadRecord {
                file: format!("possible_answer/{}", file.name),
                record: i,
                message,
            }),
        }
    }
    Ok(gold)
}

/// Converts and lints every category file found under `root` (module doc).
pub fn convert(root: &Path) -> Result<BfclOutput, CorpusError> {
    let mut out = BfclOutput::default();
    let mut seen_fn: BTreeMap<String, usize> = BTreeMap::new();
    for file in category_files(root) {
        let kind = kind(&file.category);
        if let Kind::Skipped(reason) = kind {
            out.files_skipped.insert(file.name.clone(), reason.to_string());
            continue;
        }
        let split = file.category.clone();
        let gold = read_gold(&file, &mut out)?;
        for (i, r) in read_jsonl(&file.questions)? {
            let q = match r.and_then(|v| parse_question(&v)) {
                Ok(q) => q,
                Err(message) => {
                    out.bad_records.push(BadRecord {
                        file: file.name.clone(),
                        record: i,
                        message,
                    });
                    continue;
                }
            };
            *out.questions.entry(split.clone()).or_insert(0) += 1;
            if !q.id.starts_with(&format!("{split}_")) {
                *out.id_category_mismatch.entry(split.clone()).or_insert(0) += 1;
            }
            let outcome = out.splits.entry(split.clone()).or_default();
            outcome.attempted += 1;
            let drop = |reason: &str, detail: String| Drop {
                id: q.id.clone(),
                group: split.clone(),
                reason: reason.into(),
                detail,
                question: q.user.clone(),
                source: Drop::source_text(&Value::Array(q.funcs.clone()).to_string()),
            };
            if q.turns > 1 {
                outcome.drops.push(drop(
                    "multi_turn",
                    format!("{} turns; only single-turn questions are converted", q.turns),
                ));
                continue;
            }
            // Java/JavaScript: the rows show BFCL's string-typed docs; the gold is chosen and
            // linted on the functions with their types (`typed`), then written as source text
            let lang = bfcl_lang::language(&split);
            let mut tools: Vec<Converted> = Vec::new();
            let mut typed_tools: Vec<Converted> = Vec::new();
            let mut bad_schema = None;
            for f in &q.funcs {
                let both = convert_function(&bfcl_lang::shown(f, lang))
                    .and_then(|c| Ok((c, convert_function(&bfcl_lang::typed(f))?)));
                match both {
                    Ok((c, t)) => {
                        tools.push(c);
                        typed_tools.push(t);
                    }
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
            let no_call = json!([]);
            let gt = match (kind, gold.get(&q.id)) {
                (Kind::NoCall | Kind::AnyCall, _) => &no_call,
                (_, Some(gt)) => gt,
                (_, None) => {
                    outcome
                        .drops
                        .push(drop("missing_gold", "no possible_answer line with this id".into()));
                    continue;
                }
            };
            let (mut calls, mut findings, unknown) = gold_calls(&q.id, gt, &typed_tools);
            let mut acceptable = gt.clone();
            if lang != Language::Python && unknown.is_none() {
                acceptable =
                    bfcl_lang::gold_as_source_text(&q.id, gt, &q.funcs, &typed_tools, lang, &mut calls, &mut findings);
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
            let checker = crate::tools::check::Checker::new(&specs).map_err(|message| CorpusError::Malformed {
                path: file.questions.clone(),
                message,
            })?;
            let gold_invalid = calls.iter().find_map(|c| checker.validate(c).err());
            if gold_invalid.is_some() {
                *out.gold_invalid_kept.entry(split.clone()).or_insert(0) += 1;
            }
            let original_names: Map<String, Value> =
                tools.iter().map(|t| (t.spec.name.clone(), json!(t.original))).collect();
            let mut meta = json!({"bfcl_id": q.id, "category": split});
            match kind {
                Kind::NoCall => meta["expected"] = json!("no_call"),
                Kind::AnyCall => meta["expected"] = json!("any_call"),
                _ => {}
            }
            if lang != Language::Python {
                meta["language"] = json!(lang.label());
            }
            if calls.len() > 1 {
                meta["call_order"] = json!("any");
            }
            if !q.system.is_empty() {
                meta["system"] = json!(q.system);
            }
            meta["messages"] = q.messages.clone();
            meta["original_names"] = Value::Object(original_names);
            meta["acceptable"] = acceptable;
            if lang != Language::Python {
                meta["acceptable_bfcl"] = gt.clone();
                // Each function's BFCL parameter types, for the AST check's converters.
                meta["parameter_types"] = tools
                    .iter()
                    .zip(&q.funcs)
                    .map(|(t, f)| (t.spec.name.clone(), Value::Object(bfcl_lang::parameter_types(f))))
                    .collect::<Map<String, Value>>()
                    .into();
            }
            meta["lint"] = json!(findings);
            if let Some(e) = gold_invalid {
                meta["gold_invalid"] = json!(e);
            }
            outcome.examples.push(Example {
                id: q.id.clone(),
                input: q.user.clone(),
                output: calls,
                ordered: false,
                tools: specs.into(),
                meta: Some(meta),
                ..Default::default()
            });
        }
    }
    Ok(out)
}

/// The chosen calls of one question's gold, its lint findings, and the first gold function the
/// question does not offer (if any).
fn gold_calls(id: &str, gt: &Value, tools: &[Converted]) -> (Vec<Call>, Vec<Finding>, Option<String>) {
    let mut findings: Vec<Finding> = Vec::new();
    let mut calls = Vec::new();
    let mut unknown = None;
    let finding = |kind: &str, function: &str, parameter: String, detail: String| Finding {
        id: id.to_string(),
        kind: kind.into(),
        function: function.to_string(),
        parameter,
        detail,
    };
    for call in gt.as_array().into_iter().flatten() {
        let Some((fname, args)) = call.as_object().and_then(|o| o.iter().next()) else {
            findings.push(finding(
                "malformed_gold",
                "",
                String::new(),
                format!("gold call {call} is not {{function: {{param: [values]}}}}"),
            ));
            continue;
        };
        let Some(tool) = tools.iter().find(|t| t.original == *fname) else {
            findings.push(finding(
                "unknown_function",
                fname,
                String::new(),
                format!(
                    "not among the question's functions {:?}",
                    tools.iter().map(|t| t.original.as_str()).collect::<Vec<_>>()
                ),
            ));
            unknown = Some(fname.clone());
            continue;
        };
        let empty = Map::new();
        let args = args.as_object().unwrap_or(&empty);
        lint_object(args, &tool.spec.parameters, "", &mut |kind, parameter, detail| {
            findings.push(finding(kind, fname, parameter, detail))
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
    (calls, findings, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn categories_by_file_name() {
        assert_eq!(kind("live_simple"), Kind::Ast);
        assert_eq!(kind("parallel_multiple"), Kind::Ast);
        assert_eq!(kind("irrelevance"), Kind::NoCall);
        assert_eq!(kind("live_irrelevance"), Kind::NoCall);
        assert!(matches!(kind("multi_turn_base"), Kind::Skipped(_)));
        assert_eq!(kind("simple_java"), Kind::Ast);
        assert_eq!(kind("simple_javascript"), Kind::Ast);
        assert_eq!(kind("live_relevance"), Kind::AnyCall);
    }

    #[test]
    fn chosen_values_and_unknown_function_and_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = "BFCL_v4_simple_python.json";
        let q = [
            r#"{"id": "simple_python_0", "question": [[{"role": "user", "content": "Area of base 10, height 5?"}]], "function": [{"name": "calc.area", "description": "d", "parameters": {"type": "dict", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}, "unit": {"type": "string"}, "opts": {"type": "dict", "properties": {"round": {"type": "integer"}, "fmt": {"type": "string"}}}}, "required": ["base", "height"]}}]}"#,
            r#"{"id": "simple_python_1", "question": [[{"role": "user", "content": "x"}]], "function": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}]}"#,
            "not json",
        ];
        let a = [
            r#"{"id": "simple_python_0", "ground_truth": [{"calc.area": {"base": [10], "height": [5, 5.0], "unit": ["units", ""], "opts": [{"round": [2], "fmt": ["", "x"]}]}}]}"#,
            r#"{"id": "simple_python_1", "ground_truth": [{"g": {}}]}"#,
        ];
        std::fs::write(dir.path().join(file), q.join("\n")).unwrap();
        std::fs::create_dir(dir.path().join("possible_answer")).unwrap();
        std::fs::write(dir.path().join("possible_answer").join(file), a.join("\n")).unwrap();
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
        assert_eq!(out.bad_records[0].file, file);
        assert_eq!(out.bad_records[0].record, 2);
        let kinds: Vec<_> = out.findings.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["type_mismatch", "unknown_function"]);
    }
}
