//! `obfuscate` ([`obfuscate`]): Live API-Bench App. B.1 name obfuscation without lexical leaks.
//! Every toolkit function is renamed `FUNC_i` (toolkit order), every parameter name `ARG_k`
//! (one number per distinct name over the toolkit, first-appearance order) and every gold call
//! label `VAR_n` (`$LABEL$` references in argument values too).
//!
//! Descriptions are renamed where they name an identifier, and left untouched otherwise
//! (DESIGN.md: "`FUNC_i` / `ARG_i` for identifiers only … descriptions untouched except where
//! they name an identifier"). In the descriptions of a tool T (tool, parameters, nested
//! properties, outputs; [`rewrite`]), a whole token (letters, digits, `_`) is replaced when it is
//! - the name of a toolkit function (any case: function names are identifiers) → its `FUNC_j`;
//! - exactly (case-sensitively) one of T's own parameter names → its `ARG_k`;
//!
//! and a REST path (`/v1/…`) becomes `/FUNC_i`. Another tool's parameter name is never replaced
//! in T's text: there it is an ordinary word or a column T's description talks about ("Returns
//! name, country of ship"), and `ARG_k` would name a parameter T does not have. Types, enums (they
//! hold data values), argument values and the setup step are kept. The mapping is kept in
//! `meta.variant` and [`deobfuscate`] maps calls back.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::variant_row;
use crate::dataset::Example;
use crate::tools::{Call, ToolSpec, as_label_ref};

/// The obfuscation mapping of a toolkit and its gold calls: `functions` `FUNC_i` → name,
/// `arguments` `FUNC_i` → {`ARG_k` → parameter}, `labels` `VAR_n` → gold call label.
pub fn obfuscation_mapping(tools: &[ToolSpec], calls: &[Call]) -> Value {
    let mut functions = Map::new();
    let mut arguments = Map::new();
    let mut arg_names: Vec<String> = Vec::new();
    for t in tools {
        for k in t.parameters["properties"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
        {
            if !arg_names.contains(k) {
                arg_names.push(k.clone());
            }
        }
    }
    for (i, t) in tools.iter().enumerate() {
        let f = format!("FUNC_{i}");
        functions.insert(f.clone(), json!(t.name));
        let args: Map<String, Value> = t.parameters["properties"]
            .as_object()
            .map(|m| {
                m.keys()
                    .map(|k| {
                        let j = arg_names.iter().position(|a| a == k).expect("collected");
                        (format!("ARG_{j}"), json!(k))
                    })
                    .collect()
            })
            .unwrap_or_default();
        arguments.insert(f, Value::Object(args));
    }
    let mut labels = Map::new();
    let mut seen: Vec<&str> = Vec::new();
    for c in calls.iter().filter(|c| !c.label.is_empty()) {
        if !seen.contains(&c.label.as_str()) {
            labels.insert(format!("VAR_{}", seen.len()), json!(c.label));
            seen.push(&c.label);
        }
    }
    json!({"functions": functions, "arguments": arguments, "labels": labels})
}

fn invert(m: &Map<String, Value>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(k, v)| (v.as_str().unwrap_or_default().to_string(), k.clone()))
        .collect()
}

/// Whether `c` is part of an identifier word (letters, digits, `_`).
fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The end of a REST path starting at byte `i` of `text` (`/v<digits>/` then path characters,
/// without a sentence-final `.`), if one starts there.
fn path_end(text: &str, i: usize) -> Option<usize> {
    let rest = &text[i..];
    let digits = rest.strip_prefix("/v")?;
    let n = digits.chars().take_while(char::is_ascii_digit).count();
    if n == 0 || !digits[n..].starts_with('/') {
        return None;
    }
    let mut len = rest
        .find(|c: char| !(word_char(c) || matches!(c, '/' | '{' | '}' | '.' | '-')))
        .unwrap_or(rest.len());
    while rest[..len].ends_with('.') {
        len -= 1;
    }
    Some(i + len)
}

/// The renaming of one tool's descriptions (module docs): `functions` maps every toolkit
/// function name, lowercase, to its `FUNC_j`; `own` maps the tool's own parameter names, exactly
/// as spelled, to their `ARG_k`; `path` replaces a REST path.
#[derive(Debug, Clone, Default)]
pub struct Renames {
    /// Lowercase function name → `FUNC_j`.
    pub functions: BTreeMap<String, String>,
    /// The tool's own parameter name (exact) → `ARG_k`.
    pub own: BTreeMap<String, String>,
    /// What a REST path becomes (`/FUNC_i`).
    pub path: String,
}

/// `text` with every whole word that names an identifier of `r` replaced by its placeholder,
/// and every REST path (`/v<n>/…`) replaced by `r.path` (module docs).
pub fn rewrite(text: &str, r: &Renames) -> String {
    let path = r.path.as_str();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if let Some(end) = path_end(text, i).filter(|_| i == 0 || !text[..i].ends_with(word_char)) {
            out.push_str(path);
            i = end;
            continue;
        }
        let c = text[i..].chars().next().expect("in bounds");
        if word_char(c) {
            let len = text[i..].find(|c: char| !word_char(c)).unwrap_or(text.len() - i);
            let word = &text[i..i + len];
            match r.own.get(word).or_else(|| r.functions.get(&word.to_ascii_lowercase())) {
                Some(new) => out.push_str(new),
                None => out.push_str(word),
            }
            i += len;
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Every `description` string in a JSON Schema (or spec) value rewritten with [`rewrite`].
fn rewrite_descriptions(v: &mut Value, r: &Renames) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(s) if k == "description" => *s = rewrite(s, r),
                    _ => rewrite_descriptions(x, r),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_descriptions(x, r)),
        _ => {}
    }
}

/// `$LABEL$` references in `v` renamed through `labels` (original → new), recursively.
fn rename_refs(v: &Value, labels: &BTreeMap<String, String>) -> Value {
    match v {
        Value::String(_) => match as_label_ref(v).and_then(|l| labels.get(l)) {
            Some(new) => json!(format!("${new}$")),
            None => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|x| rename_refs(x, labels)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), rename_refs(x, labels))).collect()),
        other => other.clone(),
    }
}

/// The obfuscate variant of `e` (module docs).
pub fn obfuscate(e: &Example) -> Example {
    let mapping = obfuscation_mapping(&e.tools, &e.output);
    let fun_of: BTreeMap<String, String> = invert(mapping["functions"].as_object().expect("object"));
    let label_of: BTreeMap<String, String> = invert(mapping["labels"].as_object().expect("object"));
    // Function name (lowercase) → FUNC_j, for the description rewrite.
    let functions: BTreeMap<String, String> = fun_of
        .iter()
        .map(|(n, f)| (n.to_ascii_lowercase(), f.clone()))
        .collect();
    let tools: Vec<ToolSpec> = e
        .tools
        .iter()
        .map(|t| {
            let f = &fun_of[&t.name];
            let arg_of = invert(mapping["arguments"][f].as_object().expect("object"));
            let renames = Renames {
                functions: functions.clone(),
                own: arg_of.clone(),
                path: format!("/{f}"),
            };
            let mut p = t.parameters.clone();
            if let Some(props) = t.parameters["properties"].as_object() {
                p["properties"] = Value::Object(props.iter().map(|(k, v)| (arg_of[k].clone(), v.clone())).collect());
            }
            if let Some(req) = t.parameters["required"].as_array() {
                p["required"] = json!(
                    req.iter()
                        .map(|r| arg_of.get(r.as_str().unwrap_or_default()).cloned().unwrap_or_default())
                        .collect::<Vec<_>>()
                );
            }
            rewrite_descriptions(&mut p, &renames);
            let mut output_parameters = t.output_parameters.clone();
            rewrite_descriptions(&mut output_parameters, &renames);
            ToolSpec {
                name: f.clone(),
                description: rewrite(&t.description, &renames),
                parameters: p,
                output_parameters,
            }
        })
        .collect();
    let output: Vec<Call> = e
        .output
        .iter()
        .map(|c| {
            let label = label_of.get(&c.label).cloned().unwrap_or_else(|| c.label.clone());
            match fun_of.get(&c.name) {
                Some(f) => {
                    let arg_of = invert(mapping["arguments"][f].as_object().expect("object"));
                    Call {
                        name: f.clone(),
                        arguments: c
                            .arguments
                            .iter()
                            .map(|(k, v)| {
                                (
                                    arg_of.get(k).cloned().unwrap_or_else(|| k.clone()),
                                    rename_refs(v, &label_of),
                                )
                            })
                            .collect(),
                        label,
                    }
                }
                None => Call {
                    arguments: c
                        .arguments
                        .iter()
                        .map(|(k, v)| (k.clone(), rename_refs(v, &label_of)))
                        .collect(),
                    label,
                    ..c.clone()
                },
            }
        })
        .collect();
    let mut row = variant_row(e, "obfuscate", "obfuscate", json!({"mapping": mapping}));
    row.tools = tools.into();
    row.output = output;
    row
}

/// Maps obfuscated calls back to the original names and labels with the `mapping` of
/// [`obfuscation_mapping`]; unknown names are returned unchanged.
pub fn deobfuscate(calls: &[Call], mapping: &Value) -> Vec<Call> {
    let labels: BTreeMap<String, String> = mapping["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let label = |l: &str| labels.get(l).cloned().unwrap_or_else(|| l.to_string());
    calls
        .iter()
        .map(|c| {
            let known = mapping["functions"][&c.name].as_str();
            Call {
                name: known.unwrap_or(&c.name).into(),
                arguments: c
                    .arguments
                    .iter()
                    .map(|(k, v)| {
                        let key = match known {
                            Some(_) => mapping["arguments"][&c.name][k].as_str().unwrap_or(k).to_string(),
                            None => k.clone(),
                        };
                        (key, rename_refs(v, &labels))
                    })
                    .collect(),
                label: label(&c.label),
            }
        })
        .collect()
}

/// The original identifiers of `e`'s toolkit and gold a model must not see in its obfuscated
/// row: `tool:<name>` (lowercase), `param:<tool>:<name>` (each tool's top-level and nested
/// parameter names, as spelled), `path:<path>` (REST paths found in the descriptions,
/// lowercase) and `label:<label>` (gold call labels, lowercase: a label such as `COUNT` is only a
/// leak as a label, the word `count` is also an aggregation the toolkit offers).
pub fn identifiers(e: &Example) -> Vec<String> {
    fn params(tool: &str, schema: &Value, out: &mut Vec<String>) {
        for (k, v) in schema["properties"].as_object().into_iter().flatten() {
            out.push(format!("param:{tool}:{k}"));
            params(tool, v, out);
        }
    }
    let mut out = Vec::new();
    for t in &e.tools {
        out.push(format!("tool:{}", t.name.to_ascii_lowercase()));
        params(&t.name, &t.parameters, &mut out);
        let d = &t.description;
        for i in d.char_indices().map(|(i, _)| i) {
            if let Some(end) = path_end(d, i) {
                out.push(format!("path:{}", d[i..end].to_ascii_lowercase()));
            }
        }
    }
    out.extend(
        e.output
            .iter()
            .filter(|c| !c.label.is_empty())
            .map(|c| format!("label:{}", c.label.to_ascii_lowercase())),
    );
    out.sort();
    out.dedup();
    out
}

/// The texts of a schema a model reads: property names, `required`, descriptions.
fn schema_texts(v: &Value, out: &mut String) {
    if let Some(d) = v["description"].as_str() {
        out.push(' ');
        out.push_str(d);
    }
    for r in v["required"].as_array().into_iter().flatten() {
        out.push(' ');
        out.push_str(r.as_str().unwrap_or_default());
    }
    for (k, p) in v["properties"].as_object().into_iter().flatten() {
        out.push(' ');
        out.push_str(k);
        schema_texts(p, out);
    }
}

/// The identifiers of `ids` ([`identifiers`]) that survive in what a model sees of the
/// obfuscated row `o`: a tool name as a whole word (any case) anywhere in the toolkit or the gold
/// calls' names and argument names; a parameter name as a whole word (as spelled) in its own
/// tool's texts (the tool's `meta.variant.mapping` function) or as any argument or property
/// name; a path as a substring; a label as a gold label or `$label$` reference.
pub fn surviving_identifiers(o: &Example, ids: &[String]) -> Vec<String> {
    let mapping = &o
        .meta
        .as_ref()
        .map(|m| m["variant"]["mapping"].clone())
        .unwrap_or_default();
    let mut seen = String::new();
    let mut own: BTreeMap<String, String> = BTreeMap::new();
    let mut keys: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut labels = std::collections::BTreeSet::new();
    for t in &o.tools {
        let mut text = String::new();
        text.push(' ');
        text.push_str(&t.name);
        text.push(' ');
        text.push_str(&t.description);
        schema_texts(&t.parameters, &mut text);
        schema_texts(&t.output_parameters, &mut text);
        seen.push_str(&text);
        let original = mapping["functions"][&t.name].as_str().unwrap_or(&t.name).to_string();
        own.insert(original, text);
        fn walk_keys(v: &Value, keys: &mut std::collections::BTreeSet<String>) {
            for (k, p) in v["properties"].as_object().into_iter().flatten() {
                keys.insert(k.clone());
                walk_keys(p, keys);
            }
        }
        walk_keys(&t.parameters, &mut keys);
    }
    for c in &o.output {
        seen.push(' ');
        seen.push_str(&c.name);
        labels.insert(format!("label:{}", c.label.to_ascii_lowercase()));
        for (k, v) in &c.arguments {
            seen.push(' ');
            seen.push_str(k);
            keys.insert(k.clone());
            if let Some(l) = as_label_ref(v) {
                labels.insert(format!("label:{}", l.to_ascii_lowercase()));
            }
        }
    }
    let lower = seen.to_ascii_lowercase();
    let words: std::collections::BTreeSet<&str> = lower.split(|c: char| !word_char(c)).collect();
    ids.iter()
        .filter(|id| {
            if id.starts_with("label:") {
                labels.contains(id.as_str())
            } else if let Some(p) = id.strip_prefix("path:") {
                lower.contains(p)
            } else if let Some(t) = id.strip_prefix("tool:") {
                words.contains(t)
            } else if let Some((tool, name)) = id.strip_prefix("param:").and_then(|r| r.split_once(':')) {
                keys.contains(name)
                    || own
                        .get(tool)
                        .is_some_and(|text| text.split(|c: char| !word_char(c)).any(|w| w == name))
            } else {
                false
            }
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::variants::fixtures::example;

    #[test]
    fn obfuscation_round_trips() {
        let e = example();
        let o = obfuscate(&e);
        assert_eq!(o.tools[1].name, "FUNC_1");
        assert_eq!(o.output[0].name, "FUNC_1");
        assert_eq!(
            o.output[0].arguments,
            json!({"ARG_1": 1, "ARG_2": "q"}).as_object().unwrap().clone()
        );
        assert_eq!(o.tools[1].parameters["required"], json!(["ARG_1", "ARG_2"]));
        assert_eq!(o.output[0].label, "VAR_0");
        let m = &o.meta.as_ref().unwrap()["variant"]["mapping"];
        assert_eq!(deobfuscate(&o.output, m), e.output);
    }

    /// Issue 16: REST descriptions kept the original path, gold labels kept original names,
    /// SLOT descriptions still mentioned `aggregate_data` and `key_name`.
    #[test]
    fn obfuscation_leaves_no_original_identifier() {
        let mut e = example();
        e.tools[0].description = "Count rows (GET /v1/spider/d/a/count_by_x). See get_b; give `x`.".into();
        e.tools[1].parameters["properties"]["y"]["description"] = json!("Like X in get_a, the `z` of get_B.");
        e.output[0].label = "get_b_0".into();
        e.output.push(Call {
            name: "get_a".into(),
            arguments: json!({"x": "$get_b_0$"}).as_object().unwrap().clone(),
            label: "A".into(),
        });
        let ids = identifiers(&e);
        assert!(
            ids.contains(&"path:/v1/spider/d/a/count_by_x".to_string()) && ids.contains(&"label:get_b_0".to_string())
        );
        let o = obfuscate(&e);
        assert_eq!(surviving_identifiers(&o, &ids), Vec::<String>::new());
        assert_eq!(
            o.tools[0].description,
            "Count rows (GET /FUNC_0). See FUNC_1; give `ARG_0`."
        );
        assert_eq!(
            o.tools[1].parameters["properties"]["ARG_1"]["description"],
            "Like X in FUNC_0, the `ARG_2` of FUNC_1."
        );
        assert_eq!(o.output[1].arguments["ARG_0"], "$VAR_0$");
        let m = &o.meta.as_ref().unwrap()["variant"]["mapping"];
        assert_eq!(deobfuscate(&o.output, m), e.output);
        // The parent leaks all of them.
        assert_eq!(surviving_identifiers(&e, &ids).len(), ids.len());
    }

    /// Issue 30: another tool's parameter name in a description is an ordinary word there
    /// ("whose column key_name satisfies a ARG_4 against a ARG_2"; REST "Returns ARG_11, ARG_4 of
    /// ship"): only the described tool's own parameters, as spelled, become its `ARG_k`.
    #[test]
    fn descriptions_rename_only_the_described_tools_own_identifiers() {
        let mut e = example();
        // get_a's parameter is `x`, get_b's are `y` and `z`.
        e.tools[0].description = "Returns y, z and the x of each row; see get_b.".into();
        e.tools[1].description = "Filters where y equals x; z is the Z value.".into();
        let o = obfuscate(&e);
        assert_eq!(
            o.tools[0].description,
            "Returns y, z and the ARG_0 of each row; see FUNC_1."
        );
        assert_eq!(
            o.tools[1].description,
            "Filters where ARG_1 equals x; ARG_2 is the Z value."
        );
        let ids = identifiers(&e);
        assert_eq!(surviving_identifiers(&o, &ids), Vec::<String>::new());
    }
}
