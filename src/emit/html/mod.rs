//! The build's page, `report/index.html`: what a person looks at to decide whether to trust a
//! dataset (issue 33). Self-contained — the stylesheet and scripts inline, no network, no CDN
//! — and readable from `file://`: its data sits beside it as scripts read by `<script src>`
//! (a `file://` page may not `fetch()` a JSON file).
//!
//! | file                | content                                                                 |
//! |---------------------|-------------------------------------------------------------------------|
//! | `report/index.html` | the page (`templates/report/build.html`, `build.js`, `common.js`, `page.css`) |
//! | `report/data.js`    | `window.TF_DATA`: [`data`] — the report's numbers, drop examples, trajectories, `id_prefix`, `chunk_rows` |
//! | `report/rows.js`    | `window.TF_ROWS`: the search index, one short array per row ([`rows`])    |
//! | `report/rows/<n>.js`| `window.TF_CHUNK(n, …)`: the rows themselves, read when one is opened ([`rows`]) |
//!
//! The page shows the summary (kept / attempted, rows per split, per group with bars of yield
//! and drops), every drop reason with its count and up to [`DROP_EXAMPLES`] examples, a
//! paginated row browser searching id, request and group (a row as request → calls → answer,
//! a variant row beside its parent with the difference: the drift schema diff, the text diff,
//! the toolkit change), and a chat view of the first [`TRAJECTORIES_PER_FILE`] trajectories of
//! each trajectory file, faulted ones marked. Everything is a function of the build and of the
//! trajectory files already written, so the page is byte-identical across builds; the files are
//! hashed into `MANIFEST.json` like every other. `toolforge build --no-html` leaves them out.

pub mod page;
pub mod rows;

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use crate::dataset::Build;

/// Examples shown per drop reason.
pub const DROP_EXAMPLES: usize = 5;
/// Trajectories shown per trajectory file (`trajectories/<split>[.faults].jsonl`).
pub const TRAJECTORIES_PER_FILE: usize = 10;
/// Characters of one chat message shown (tool results can be long); the rest is cut with `…`.
pub const MESSAGE_CHARS: usize = 2000;

/// The page's files (`report/index.html`, `report/data.js`, `report/rows.js`,
/// `report/rows/<n>.js`) as (relative path, bytes). `report` is the `report/verification.json` document; `trajectories` the
/// directory holding the trajectory files already written (absent for families without them).
pub fn files(build: &Build, report: &Value, trajectories: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let data = data(report, &sample_trajectories(trajectories)?);
    let html = page::render(
        "build.html",
        include_str!("../../../templates/report/build.html"),
        json!({
            "dataset": build.recipe.name,
            "format": build.recipe.format,
            "css": page::CSS,
            "common_js": page::COMMON_JS,
            "page_js": include_str!("../../../templates/report/build.js"),
        }),
    )?;
    let prefix = format!("{}/", build.recipe.name);
    let (chunks, index) = rows::files(build, &prefix);
    let mut data = data;
    data["id_prefix"] = json!(prefix);
    data["chunk_rows"] = json!(rows::CHUNK_ROWS);
    let mut files = vec![
        ("report/index.html".into(), html.into_bytes()),
        ("report/data.js".into(), page::js_data("TF_DATA", &data)),
        ("report/rows.js".into(), page::js_data("TF_ROWS", &index)),
    ];
    files.extend(chunks);
    Ok(files)
}

/// `window.TF_DATA`: the report's numbers as `report/verification.json` has them (`dataset`,
/// `format`, `attempted`, `kept`, `dropped`, `bad_records`, `per_split`, `group_kind`,
/// `per_group`, `dropped_by_reason`), `drop_examples` (`{reason: [≤ DROP_EXAMPLES drops, report
/// order]}`, each `{"id", "group", "reason", "detail", "question"?, "source"?}`: the drop's
/// request and what it was built from, [`crate::dataset::Drop`]), and `trajectories` ([`sample_trajectories`]).
pub fn data(report: &Value, trajectories: &[Value]) -> Value {
    let mut d = serde_json::Map::new();
    for k in [
        "dataset",
        "format",
        "attempted",
        "kept",
        "dropped",
        "bad_records",
        "per_split",
        "group_kind",
        "per_group",
        "dropped_by_reason",
    ] {
        d.insert(k.into(), report[k].clone());
    }
    let mut examples: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for drop in report["dropped_list"].as_array().into_iter().flatten() {
        let list = examples.entry(drop["reason"].as_str().unwrap_or("")).or_default();
        if list.len() < DROP_EXAMPLES {
            list.push(drop);
        }
    }
    d.insert("drop_examples".into(), json!(examples));
    d.insert("trajectories".into(), Value::Array(trajectories.to_vec()));
    Value::Object(d)
}

/// The first [`TRAJECTORIES_PER_FILE`] lines of each `*.jsonl` file directly in `dir` (file
/// names in order), each as `{"id", "file", "messages", "faults"?}` (the `tools` left out,
/// message texts cut at [`MESSAGE_CHARS`]; `faults` only when the trajectory has some). No
/// directory: none.
pub fn sample_trajectories(dir: &Path) -> Result<Vec<Value>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let file = std::io::BufReader::new(std::fs::File::open(dir.join(&name))?);
        for line in file.lines().take(TRAJECTORIES_PER_FILE) {
            let v: Value = serde_json::from_str(&line?)?;
            let mut messages = v["messages"].clone();
            for m in messages.as_array_mut().into_iter().flatten() {
                if let Some(text) = m["content"].as_str().filter(|t| t.chars().count() > MESSAGE_CHARS) {
                    m["content"] = json!(format!("{}…", text.chars().take(MESSAGE_CHARS).collect::<String>()));
                }
            }
            let mut t = json!({"id": v["id"], "file": name, "messages": messages});
            if let Some(f) = v.get("faults").filter(|f| f.as_array().is_some_and(|a| !a.is_empty())) {
                t["faults"] = f.clone();
            }
            out.push(t);
        }
    }
    Ok(out)
}
