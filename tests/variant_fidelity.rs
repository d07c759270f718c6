//! Issue 30, items 2 and 3, on every variant row of slot/sel/rest-spider-variants (Spider dev
//! from ../shared/corpora), judged against the rows' own texts, not against the operators' code:
//!
//! - perturbed requests keep every gold argument value verbatim (a value that occurs in the
//!   original request, case-sensitively, occurs in the perturbed one; so does a value that
//!   occurs only up to case, as the original request spells it);
//! - obfuscated descriptions hold no placeholder that is not the described tool's own name
//!   (an `ARG_k` of another tool, or a `FUNC_j` the original description did not name);
//! - `default_flip` descriptions state the new default;
//! - distractors are related in topic: at least 90 % share a table or column word with the
//!   gold (before the BM25 ranking: 31 % REST and SEL, 54 % SLOT).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;
use toolforge::dataset::{Build, Example};
use toolforge::pipeline::compile;
use toolforge::tools::ToolSpec;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn build(recipe: &str) -> Build {
    let tmp = tempfile::tempdir().unwrap();
    compile(
        &root().join(format!("recipes/{recipe}.toml")),
        Some(&tmp.path().join("store")),
        false,
    )
    .unwrap()
}

fn meta<'e>(e: &'e Example, key: &str) -> &'e Value {
    &e.meta.as_ref().unwrap()[key]
}

fn variants<'b>(b: &'b Build, kind: &str) -> Vec<&'b Example> {
    b.groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| e.meta.as_ref().is_some_and(|m| m["variant_kind"] == kind))
        .collect()
}

/// The texts of the gold argument values of `e`: strings (not `$label$` references) and numbers
/// as written in JSON and, for whole numbers, without the fraction (`500` for `500.0`).
fn gold_values(e: &Example) -> BTreeSet<String> {
    fn walk(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::String(s) if !(s.len() > 2 && s.starts_with('$') && s.ends_with('$')) && !s.trim().is_empty() => {
                out.insert(s.clone());
            }
            Value::Number(n) => {
                let f = n.as_f64().unwrap();
                out.insert(if f.fract() == 0.0 {
                    format!("{}", f as i64)
                } else {
                    n.to_string()
                });
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    for c in e.output.iter().filter(|c| c.name != "initialize_active_data") {
        for v in c.arguments.values() {
            walk(v, &mut out);
        }
    }
    out
}

/// The occurrences of `value` in `text` matched up to ASCII case, as `text` spells them.
fn spellings<'t>(text: &'t str, value: &str) -> Vec<&'t str> {
    let (folded, v) = (text.to_ascii_lowercase(), value.to_ascii_lowercase());
    folded
        .match_indices(v.as_str())
        .map(|(i, m)| &text[i..i + m.len()])
        .collect()
}

/// Perturbed rows whose request lost a gold value that occurred in the original: verbatim, or
/// up to case as the original request spelled it.
fn perturbed_rows_losing_a_value(b: &Build) -> (usize, usize, Vec<String>) {
    let rows = variants(b, "perturb");
    let mut checked = 0;
    let mut lost = Vec::new();
    for v in &rows {
        let original = meta(v, "variant")["original_input"].as_str().unwrap();
        for value in gold_values(v) {
            for spelled in spellings(original, &value) {
                checked += 1;
                if !v.input.contains(spelled) {
                    lost.push(format!("{}: {value:?} (spelled {spelled:?}) in {:?}", v.id, v.input));
                }
            }
        }
    }
    (rows.len(), checked, lost)
}

/// A word in the singular, roughly (`weights` → `weight`, `nationalities` → `nationality`):
/// getter names are plurals of column names.
fn singular(w: &str) -> String {
    let w = w.to_ascii_lowercase();
    if w.len() > 4 && w.ends_with("ies") {
        format!("{}y", &w[..w.len() - 3])
    } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
        w[..w.len() - 1].to_string()
    } else {
        w
    }
}

/// The topic words of identifiers: split on anything not a letter or digit, singular, without
/// one-letter and all-digit words and the `generic` ones.
fn words_of<'a>(names: impl IntoIterator<Item = &'a str>, generic: &BTreeSet<String>) -> BTreeSet<String> {
    names
        .into_iter()
        .flat_map(|n| n.split(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| w.len() > 1 && !w.chars().all(|c| c.is_ascii_digit()))
        .map(singular)
        .filter(|w| !generic.contains(w))
        .collect()
}

/// The topic words of a tool: those of its name and parameter names.
fn topic_words(t: &ToolSpec, generic: &BTreeSet<String>) -> BTreeSet<String> {
    let params = t.parameters["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str());
    words_of(std::iter::once(t.name.as_str()).chain(params), generic)
}

/// The judge of relatedness, shared table / column words, over every distractors row
/// whose gold has a topic word. Topic words: those of tool and parameter names, without the
/// words of more than a tenth of the build's tools (`get`, `count`, `by`, `name`, …). The gold's:
/// REST, its endpoints'; SEL, its getter calls' names and `key_name` columns; SLOT, the
/// instance's columns (its tools are the shared catalog). Returns (distractors judged, those
/// sharing a word with the gold, examples of the others).
fn distractors_sharing_a_topic_word(b: &Build) -> (usize, usize, Vec<String>) {
    let mut all: BTreeMap<&str, &ToolSpec> = BTreeMap::new();
    for e in b.groups.values().flat_map(|o| &o.examples) {
        for t in e.tools.iter() {
            all.insert(&t.name, t);
        }
    }
    let mut df: BTreeMap<String, usize> = BTreeMap::new();
    for t in all.values() {
        for w in topic_words(t, &BTreeSet::new()) {
            *df.entry(w).or_insert(0) += 1;
        }
    }
    let generic: BTreeSet<String> = df
        .into_iter()
        .filter(|(_, n)| *n * 10 > all.len())
        .map(|(w, _)| w)
        .collect();
    let (mut judged, mut sharing) = (0, 0);
    let mut unrelated = Vec::new();
    for v in variants(b, "distractors") {
        let gold = match b.recipe.format.as_str() {
            "slot" => words_of(
                v.key_values_and_descriptions.iter().map(|k| k.key_name.as_str()),
                &generic,
            ),
            "sel" => words_of(
                v.output
                    .iter()
                    .filter_map(|c| c.arguments.get("key_name").and_then(Value::as_str))
                    .chain(
                        v.output
                            .iter()
                            .map(|c| c.name.as_str())
                            .filter(|n| n.starts_with("get_")),
                    ),
                &generic,
            ),
            _ => v
                .tools
                .iter()
                .filter(|t| v.output.iter().any(|c| c.name == t.name))
                .flat_map(|t| topic_words(t, &generic))
                .collect(),
        };
        if gold.is_empty() {
            continue;
        }
        for d in meta(v, "variant")["distractors"].as_array().unwrap() {
            let name = d["name"].as_str().unwrap();
            let t = v.tools.iter().find(|t| t.name == name).unwrap();
            judged += 1;
            if topic_words(t, &generic).is_disjoint(&gold) {
                unrelated.push(format!("{}: {name} for gold words {gold:?}", v.id));
            } else {
                sharing += 1;
            }
        }
    }
    (judged, sharing, unrelated)
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every description text of a tool spec (tool, parameters, nested, outputs), concatenated.
fn descriptions(t: &ToolSpec) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        Value::String(s) if k == "description" => {
                            out.push('\n');
                            out.push_str(s);
                        }
                        _ => walk(x, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = t.description.clone();
    walk(&t.parameters, &mut out);
    walk(&t.output_parameters, &mut out);
    out
}

/// Obfuscated tools whose descriptions hold a placeholder that is not the tool's own: an
/// `ARG_k` that is not one of its parameters, or a `FUNC_j` (other than itself) whose original
/// tool name (from the row's mapping) is not a word of the parent tool's descriptions.
fn foreign_placeholders(b: &Build) -> (usize, Vec<String>) {
    let parents: BTreeMap<&str, &Example> = b
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| e.meta.as_ref().is_none_or(|m| m.get("variant_of").is_none()))
        .map(|e| (e.id.as_str(), e))
        .collect();
    let mut tools = 0;
    let mut bad = Vec::new();
    for v in variants(b, "obfuscate") {
        let parent = parents[meta(v, "variant_of").as_str().unwrap()];
        let functions = &meta(v, "variant")["mapping"]["functions"];
        for (t, original) in v.tools.iter().zip(parent.tools.iter()) {
            tools += 1;
            let own: BTreeSet<&str> = t.parameters["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .collect();
            let original_words: BTreeSet<String> = descriptions(original)
                .split(|c: char| !word_char(c))
                .map(str::to_ascii_lowercase)
                .collect();
            let text = descriptions(t);
            let foreign: Vec<&str> = text
                .split(|c: char| !word_char(c))
                .filter(|w| {
                    (w.starts_with("ARG_") && !own.contains(w))
                        || (w.starts_with("FUNC_")
                            && *w != t.name
                            && !functions[*w]
                                .as_str()
                                .is_some_and(|n| original_words.contains(&n.to_ascii_lowercase())))
                })
                .collect();
            if !foreign.is_empty() {
                bad.push(format!("{} {}: {foreign:?} in {text:?}", v.id, t.name));
            }
        }
    }
    (tools, bad)
}

/// `default_flip` parameters (per drift row's change log) whose A_new description does not
/// state the new default, or still states the old one.
fn flipped_defaults_misdescribed(b: &Build) -> (usize, Vec<String>) {
    let spelled = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut flips = 0;
    let mut bad = Vec::new();
    for v in variants(b, "drift") {
        let detail = meta(v, "variant");
        let new: Vec<ToolSpec> = serde_json::from_value(detail["tools_new"].clone()).unwrap();
        for (i, old) in v.tools.iter().enumerate() {
            let Some(changes) = detail["changes"][&old.name].as_array() else {
                continue;
            };
            for c in changes.iter().filter(|c| c["operator"] == "default_flip") {
                flips += 1;
                let p = c["parameter"].as_str().unwrap();
                let renamed = changes
                    .iter()
                    .find(|r| r["operator"] == "parameter_rename" && r["from"] == p)
                    .and_then(|r| r["to"].as_str())
                    .unwrap_or(p);
                // The parameter, at the top level or inside a `nested_object` group.
                fn find<'v>(schema: &'v Value, name: &str) -> Option<&'v Value> {
                    let props = schema["properties"].as_object()?;
                    props.get(name).or_else(|| props.values().find_map(|p| find(p, name)))
                }
                let d = find(&new[i].parameters, renamed)
                    .and_then(|p| p["description"].as_str())
                    .unwrap_or("");
                let lower = d.to_lowercase();
                let (o, n) = (spelled(&c["old"]).to_lowercase(), spelled(&c["new"]).to_lowercase());
                let states_old = [
                    format!("default `{o}`"),
                    format!("default: `{o}`"),
                    format!("default {o}"),
                    format!("default: {o}"),
                ]
                .iter()
                .any(|s| lower.contains(s.as_str()));
                let states_new = [
                    format!("default `{n}`"),
                    format!("default: `{n}`"),
                    format!("default {n}"),
                    format!("default: {n}"),
                ]
                .iter()
                .any(|s| lower.contains(s.as_str()));
                if states_old || !states_new {
                    bad.push(format!("{} {}.{renamed}: {d:?} (old {o}, new {n})", v.id, old.name));
                }
            }
        }
    }
    (flips, bad)
}

fn check(recipe: &str) {
    let b = build(recipe);
    let (rows, checked, lost) = perturbed_rows_losing_a_value(&b);
    eprintln!(
        "{recipe}: {rows} perturbed rows, {checked} verbatim gold values checked, {} lost",
        lost.len()
    );
    assert!(rows > 0 && checked > 0);
    assert!(
        lost.is_empty(),
        "{recipe}: {} values lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let (tools, bad) = foreign_placeholders(&b);
    eprintln!(
        "{recipe}: {tools} obfuscated tools, {} with a foreign placeholder",
        bad.len()
    );
    assert!(tools > 0);
    assert!(
        bad.is_empty(),
        "{recipe}: {} tools, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    let (flips, bad) = flipped_defaults_misdescribed(&b);
    eprintln!("{recipe}: {flips} flipped defaults, {} misdescribed", bad.len());
    let bad_flips = bad;
    // Issue 30 item 4: before, 31 % (REST, SEL) and 54 % (SLOT) of distractors shared a table
    // or column word with the gold (world_1 → employee_hire_evaluation).
    let (judged, sharing, unrelated) = distractors_sharing_a_topic_word(&b);
    eprintln!(
        "{recipe}: {judged} distractors judged, {sharing} share a table/column word with the gold; others e.g. {:?}",
        &unrelated[..unrelated.len().min(5)]
    );
    assert!(judged > 0);
    assert!(
        sharing as f64 >= 0.9 * judged as f64,
        "{recipe}: only {sharing} / {judged} distractors share a table/column word with the gold"
    );
    let bad = bad_flips;
    assert!(
        bad.is_empty(),
        "{recipe}: {} flips, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}

#[test]
fn slot_variants_keep_values_rename_only_identifiers_and_draw_related_distractors() {
    check("slot-spider-variants");
}

#[test]
fn sel_variants_keep_values_rename_only_identifiers_and_draw_related_distractors() {
    check("sel-spider-variants");
}

#[test]
fn rest_variants_keep_values_rename_only_identifiers_and_draw_related_distractors() {
    check("rest-spider-variants");
}
