//! The rows of the build page, lean enough for a page over 137k rows (seq-topv2): a search
//! index read at load time, and the rows themselves in chunks read when a row is opened.
//!
//! `report/rows.js` (`window.TF_ROWS`, [`index`]): one array per row, build order (groups in
//! order, rows in input order): `[id without the "<dataset>/" prefix, group (database or
//! split), request]`, a variant row adding `variant_kind` and its parent's id (same prefix cut).
//!
//! `report/rows/<n>.js` (`window.TF_CHUNK(n, rows)`, [`chunks`]): rows `n·CHUNK_ROWS ..`, one
//! object each — `i` id, `s` split, `g` group, `q` request, `c` calls `[[name, arguments,
//! label]]`, and when present `u` setup calls (same shape), `e` BIRD evidence, `k` gold SQL, `a`
//! answer `{"rows": first ANSWER_ROWS rows, "n": rows}`, `x` a variant row's difference from its
//! parent ([`variant`]). No toolkit: the answer cut to its first rows.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::dataset::{Build, Example};
use crate::tools::{Call, ToolSpec};

/// Answer rows a row carries on the page (the rest are counted in `n`).
pub const ANSWER_ROWS: usize = 10;

/// `[name, arguments, label]`.
fn call(c: &Call) -> Value {
    json!([c.name, c.arguments, c.label])
}

/// Rows per chunk file `report/rows/<n>.js`.
pub const CHUNK_ROWS: usize = 500;

/// The page's row files of `build`: `report/rows/<n>.js` as (path, bytes), and the search
/// index `window.TF_ROWS` ([`index_entry`] of every row, build order); `prefix` is cut from
/// the index's ids. The chunks are built in parallel, each row object dropped once its chunk
/// is written out, so a large build never holds every row's object at once.
pub fn files(build: &Build, prefix: &str) -> (Vec<(String, Vec<u8>)>, Value) {
    use rayon::prelude::*;
    let by_id: HashMap<&str, &Example> = build
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .map(|e| (e.id.as_str(), e))
        .collect();
    let examples: Vec<(&str, &Example)> = build
        .groups
        .iter()
        .flat_map(|(g, o)| o.examples.iter().map(move |e| (g.as_str(), e)))
        .collect();
    let chunks: Vec<(String, Vec<u8>, Vec<Value>)> = examples
        .par_chunks(CHUNK_ROWS)
        .enumerate()
        .map(|(n, chunk)| {
            let rows: Vec<Value> = chunk.iter().map(|(g, e)| row(g, e, &by_id)).collect();
            let index = rows.iter().map(|r| index_entry(r, prefix)).collect();
            (
                format!("report/rows/{n}.js"),
                super::page::js_chunk(n, &Value::Array(rows)),
                index,
            )
        })
        .collect();
    let mut index = Vec::with_capacity(examples.len());
    let mut files = Vec::with_capacity(chunks.len());
    for (path, bytes, entries) in chunks {
        files.push((path, bytes));
        index.extend(entries);
    }
    (files, Value::Array(index))
}

/// One row's entry in `window.TF_ROWS` (module docs) from its chunk object; `prefix` is cut
/// from its ids.
pub fn index_entry(r: &Value, prefix: &str) -> Value {
    let cut = |v: &Value| {
        let id = v.as_str().unwrap_or("");
        json!(id.strip_prefix(prefix).unwrap_or(id))
    };
    let mut a = vec![cut(&r["i"]), r["g"].clone(), r["q"].clone()];
    if let Some(x) = r.get("x") {
        a.push(x["kind"].clone());
        a.push(cut(&x["of"]));
    }
    Value::Array(a)
}

fn row(group: &str, e: &Example, by_id: &HashMap<&str, &Example>) -> Value {
    let mut r = Map::new();
    r.insert("i".into(), json!(e.id));
    r.insert("s".into(), json!(e.split));
    r.insert("g".into(), json!(group));
    r.insert("q".into(), json!(e.input));
    r.insert("c".into(), Value::Array(e.output.iter().map(call).collect()));
    let setup: Vec<Value> = e
        .initialization_step
        .iter()
        .chain(&e.additional_setup_steps)
        .map(call)
        .collect();
    if !setup.is_empty() {
        r.insert("u".into(), Value::Array(setup));
    }
    if let Some(ev) = e.evidence.as_ref().filter(|t| !t.is_empty()) {
        r.insert("e".into(), json!(ev));
    }
    if let Some(sql) = &e.sql {
        r.insert("k".into(), json!(sql));
    }
    if let Some(a) = &e.gold_answer {
        r.insert(
            "a".into(),
            json!({"rows": a.iter().take(ANSWER_ROWS).collect::<Vec<_>>(), "n": a.len()}),
        );
    }
    if let Some(x) = variant(e, by_id) {
        r.insert("x".into(), x);
    }
    Value::Object(r)
}

/// A variant row's difference from its parent, `None` for an original row: `{"of": parent id,
/// "kind"}` plus, by kind, `schema` (drift: `[{"name", "changes", "old", "new"}]`, A_old and
/// A_new of each changed tool the row calls; `changed_tools` counts all the toolkit's), `added` / `removed` tool names (a changed toolkit: distractors,
/// obfuscation, shortlists), `mapping` (obfuscation's names). A changed request (perturbation,
/// paraphrase) is diffed by the page against the parent's `q`.
pub fn variant(e: &Example, by_id: &HashMap<&str, &Example>) -> Option<Value> {
    let meta = e.meta.as_ref()?;
    let of = meta.get("variant_of")?.as_str()?;
    let kind = meta["variant_kind"].as_str().unwrap_or("");
    let detail = &meta["variant"];
    let mut x = Map::new();
    x.insert("of".into(), json!(of));
    x.insert("kind".into(), json!(kind));
    if let (Some(changes), Some(new)) = (detail["changes"].as_object(), detail["tools_new"].as_array()) {
        // The tools the row calls (its parent's calls, A_old names); the other changed tools
        // of the toolkit are only counted.
        let called: Vec<&str> = by_id
            .get(of)
            .map(|p| p.output.iter().map(|c| c.name.as_str()).collect())
            .unwrap_or_default();
        let changed = || {
            e.tools
                .iter()
                .zip(new)
                .filter(|(old, _)| changes.contains_key(&old.name))
        };
        let schema: Vec<Value> = changed()
            .filter(|(old, _)| called.is_empty() || called.contains(&old.name.as_str()))
            .map(|(old, new)| json!({"name": old.name, "changes": changes[&old.name], "old": spec(old), "new": new}))
            .collect();
        x.insert("changed_tools".into(), json!(changed().count()));
        x.insert("schema".into(), Value::Array(schema));
    }
    if let Some(parent) = by_id.get(of) {
        let names = |t: &crate::tools::Toolkit| t.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        let (before, after) = (names(&parent.tools), names(&e.tools));
        if before != after {
            let added: Vec<&String> = after.iter().filter(|n| !before.contains(n)).collect();
            let removed: Vec<&String> = before.iter().filter(|n| !after.contains(n)).collect();
            x.insert("added".into(), json!(added));
            x.insert("removed".into(), json!(removed));
        }
    }
    if let Some(m) = detail.get("mapping") {
        x.insert("mapping".into(), m.clone());
    }
    Some(Value::Object(x))
}

/// A tool as the page shows it in a schema diff (its output schema left out).
fn spec(t: &ToolSpec) -> Value {
    json!({"name": t.name, "description": t.description, "parameters": t.parameters})
}
