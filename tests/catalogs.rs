//! The MCP catalog (`mcp-tools`) and BFCL (`bfcl`) builds on the real corpora in
//! ../shared/corpora: counts, every emitted schema valid, every tool with its own description,
//! the BFCL gold lint, determinism; plus the sources pointed (through their environment
//! variables, with the real CLI) at a directory of registry dumps and at the BFCL categories
//! that are not in shared/ (`tests/catalogs_bfcl/`: records in the official shape).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use toolforge::pipeline::build_and_emit;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Every function of `tools/functions.json`: a valid name and a parameters schema that passes the
/// meta-schema and compiles.
fn assert_catalog_valid(dir: &Path) -> usize {
    let functions = json(&dir.join("tools/functions.json"));
    let functions = functions.as_array().unwrap();
    let mut names = std::collections::HashSet::new();
    for f in functions {
        let f = &f["function"];
        let name = f["name"].as_str().unwrap();
        assert!(
            !name.is_empty()
                && name.len() <= 64
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "bad function name {name:?}"
        );
        assert!(names.insert(name.to_string()), "duplicate function name {name}");
        let p = &f["parameters"];
        assert_eq!(p["type"], "object", "{name}");
        assert!(p.get("properties").is_some(), "{name}: no properties");
        jsonschema::meta::validate(p).unwrap_or_else(|e| panic!("{name}: {e}"));
        jsonschema::validator_for(p).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    functions.len()
}

/// A JSONL row field that emit stores as JSON text (`tools`, `meta`).
fn field(row: &Value, k: &str) -> Value {
    serde_json::from_str(row[k].as_str().unwrap_or_else(|| panic!("{k} is not a string"))).unwrap()
}

/// The build summary prints counts, never a list: no line over 300 characters, no JSON array of
/// objects (issue 13: a 200 KB duplicate list, the BFCL lint on one JSON line).
fn assert_summary_counts_only(summary: &str) {
    for line in summary.lines() {
        assert!(
            line.len() <= 300,
            "summary line of {} characters: {line:.200}",
            line.len()
        );
        assert!(!line.contains("[{"), "a list in the summary: {line:.200}");
    }
}

fn build_twice_identical(recipe: &str, files: &[&str]) -> (PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let r = root().join(format!("recipes/{recipe}.toml"));
    let (out, store) = (tmp.path().join("out"), tmp.path().join("store"));
    let summary = build_and_emit(&r, Some(&out), Some(&store), false).unwrap();
    assert!(summary.contains("wrote"), "{summary}");
    assert_summary_counts_only(&summary);
    // a cold build in a fresh store and output gives the same bytes
    let out2 = tmp.path().join("out2");
    build_and_emit(&r, Some(&out2), Some(&tmp.path().join("store2")), false).unwrap();
    for f in files.iter().chain(["MANIFEST.json"].iter()) {
        assert!(
            std::fs::read(out.join(recipe).join(f)).unwrap() == std::fs::read(out2.join(recipe).join(f)).unwrap(),
            "{recipe}/{f} differs between two builds"
        );
    }
    (out.join(recipe), tmp)
}

#[test]
fn mcp_tools_catalog_counts_validity_bundles_determinism() {
    let (dir, _tmp) = build_twice_identical(
        "mcp-tools",
        &[
            "data/train.parquet",
            "data/train.jsonl",
            "tools/functions.json",
            "tools/mcp.json",
            "report/catalog_fixes.json",
        ],
    );
    let r = json(&dir.join("report/verification.json"));
    let s = &r["stats"];
    assert_eq!(s["servers"], 70);
    assert_eq!(s["tools_in"], 527);
    assert_eq!(s["tools_rejected"], 0);
    // Exact dedup (issue 15): Desktop Commander MCP and Filesystem MCP Server share 5 tool names
    // and schemas but are different servers with different descriptions: nothing is merged.
    assert_eq!(s["tools_deduplicated"], 0);
    assert_eq!(s["tools_emitted"], 527);
    // 161 schemas declare draft-07
    assert_eq!(s["fixes_by_kind"]["schema_uri_removed"], 161);
    // 13 names shared by 2–4 servers (different tools): the first keeps the name, the 17 later
    // ones are qualified as <server>__<name> (issue 30: all 30 were, so names changed with
    // whatever else was in the directory)
    assert_eq!(s["fixes_by_kind"]["name_qualified"], 17);
    assert_eq!(r["bad_records"], 0);
    let emitted = assert_catalog_valid(&dir);
    assert_eq!(emitted, 527);
    assert_own_descriptions(&dir, &root().join("../shared/corpora/mcp/livemcpbench_tools.json"));
    // the MCP catalog keeps server identity: every emitted tool under its server(s)
    let mcp = json(&dir.join("tools/mcp.json"));
    let servers = mcp["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 70);
    let listed: usize = servers.iter().map(|s| s["tools"].as_array().unwrap().len()).sum();
    assert_eq!(listed, 527, "each server lists all its tools");
    for s in servers {
        for t in s["tools"].as_array().unwrap() {
            jsonschema::meta::validate(&t["inputSchema"]).unwrap();
            assert!(t["_meta"]["toolforge/function"].is_string());
        }
    }
    // bundles: 200 requested, each with ≥ 2 servers, seeds first, reference tools in meta
    assert_eq!(r["attempted"], 200);
    let rows: Vec<Value> = std::fs::read_to_string(dir.join("data/train.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len() as u64, r["kept"].as_u64().unwrap());
    // with the similarity floor 0.1 and an entity word shared with the first seed (issue 30:
    // no member matched on generic words only), 26 draws cannot be filled with related tools
    // (too_few_related), 9 repeat an earlier tool set (duplicate_bundle) and 2 find related
    // tools on their own server only (too_few_servers)
    assert_eq!(rows.len(), 163);
    assert_eq!(
        r["dropped_by_reason"],
        serde_json::json!({"duplicate_bundle": 9, "too_few_related": 26, "too_few_servers": 2})
    );
    for row in &rows {
        let meta = field(row, "meta");
        let refs = meta["reference_tools"].as_array().unwrap();
        assert_eq!(refs.len(), 5);
        assert_eq!(refs[0]["role"], "seed");
        let servers: std::collections::BTreeSet<_> = refs.iter().map(|t| t["server"].as_str().unwrap()).collect();
        assert!(servers.len() >= 2);
        assert_eq!(field(row, "tools").as_array().unwrap().len(), 5);
        // the similarity floor: every member shares vocabulary with the first seed, an entity
        // word among it
        for t in &refs[1..] {
            assert!(t["score"].as_f64().unwrap() >= 0.1, "{}: {t}", row["id"]);
            assert!(!t["shared"].as_array().unwrap().is_empty(), "{}: {t}", row["id"]);
        }
    }
    assert_eq!(s["bundle_similarity"]["below_floor"], 0);
}

/// Issue 15: every emitted tool keeps its own description. For each function of
/// `tools/functions.json`, its `tools/mcp.json` entry (found through `_meta`) names the source
/// tool; the descriptions emitted for each (server, tool) are exactly the source's, as a multiset.
fn assert_own_descriptions(dir: &Path, source: &Path) {
    let mut want: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for s in json(source).as_array().unwrap() {
        let server = s["name"].as_str().unwrap().to_string();
        for g in s["tools"].as_object().unwrap().values() {
            for t in g["tools"].as_array().unwrap() {
                want.entry((server.clone(), t["name"].as_str().unwrap().to_string()))
                    .or_default()
                    .push(t["description"].as_str().unwrap_or("").to_string());
            }
        }
    }
    let mcp = json(&dir.join("tools/mcp.json"));
    let mut by_function: BTreeMap<String, (String, String, String)> = BTreeMap::new();
    let mut got: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for s in mcp["servers"].as_array().unwrap() {
        let server = s["name"].as_str().unwrap().to_string();
        for t in s["tools"].as_array().unwrap() {
            let (name, desc) = (t["name"].as_str().unwrap(), t["description"].as_str().unwrap());
            let f = t["_meta"]["toolforge/function"].as_str().unwrap().to_string();
            let prev = by_function.insert(f.clone(), (server.clone(), name.into(), desc.into()));
            assert!(prev.is_none(), "{f} listed twice in mcp.json");
            got.entry((server.clone(), name.into())).or_default().push(desc.into());
        }
    }
    for v in want.values_mut().chain(got.values_mut()) {
        v.sort();
    }
    assert_eq!(got, want, "mcp.json descriptions differ from the source's");
    let mut wrong = Vec::new();
    for f in json(&dir.join("tools/functions.json")).as_array().unwrap() {
        let f = &f["function"];
        let (server, name, desc) = &by_function[f["name"].as_str().unwrap()];
        if f["description"] != desc.as_str() || !want[&(server.clone(), name.clone())].contains(desc) {
            wrong.push(f["name"].clone());
        }
    }
    assert!(
        wrong.is_empty(),
        "{} functions with a description not their own: {wrong:?}",
        wrong.len()
    );
}

/// Runs the real CLI with one environment variable set; returns the summary.
fn cli_build(recipe: &str, env: (&str, &Path), out: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .current_dir(root())
        .env(env.0, env.1)
        .args(["build", recipe, "-q", "--out"])
        .arg(out.join("out"))
        .arg("--store")
        .arg(out.join("store"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    text
}

/// Issue 15: any directory of registry files is the MCP source through `TOOLFORGE_MCP` — here a
/// Smithery JSON Lines dump and an MCP `tools/list` result, neither named livemcpbench_tools.json.
#[test]
fn mcp_source_is_any_directory_of_registry_dumps() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = tmp.path().join("registry");
    std::fs::create_dir(&reg).unwrap();
    let schema = r#"{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}"#;
    let smithery = [
        format!(
            r#"{{"qualifiedName": "@acme/papers", "displayName": "Papers", "description": "Paper search", "tools": [{{"name": "search_papers", "description": "Search research papers by keyword", "inputSchema": {schema}}}, {{"name": "get_paper", "description": "Get a research paper's details", "inputSchema": {schema}}}]}}"#
        ),
        format!(
            r#"{{"qualifiedName": "@acme/scholar", "description": "Scholar", "tools": [{{"name": "search_papers", "description": "Search scholarly papers and citations", "inputSchema": {schema}}}]}}"#
        ),
    ];
    std::fs::write(reg.join("smithery.jsonl"), smithery.join("\n")).unwrap();
    std::fs::write(
        reg.join("arxiv-server.json"),
        format!(
            r#"{{"jsonrpc": "2.0", "id": 1, "result": {{"tools": [{{"name": "list_papers", "description": "List recent arXiv research papers", "inputSchema": {schema}}}]}}}}"#
        ),
    )
    .unwrap();
    let summary = cli_build("mcp-tools", ("TOOLFORGE_MCP", &reg), tmp.path());
    assert_summary_counts_only(&summary);
    let dir = tmp.path().join("out/mcp-tools");
    let r = json(&dir.join("report/verification.json"));
    assert_eq!(r["stats"]["servers"], 3, "{summary}");
    assert_eq!(
        r["stats"]["servers_by_shape"],
        serde_json::json!({"smithery": 2, "tools_list": 1})
    );
    assert_eq!(r["stats"]["tools_emitted"], 4);
    let names: Vec<_> = json(&dir.join("tools/functions.json"))
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "list_papers",
            "search_papers",
            "get_paper",
            "_acme_scholar__search_papers",
        ]
    );
}

/// Issue 30 item 6: a dump directory holding one file that is not JSON builds the rest (the file
/// is one counted bad record; it aborted the build with exit 2), and a ToolGym server snapshot
/// `{server_info, tools}` yields its tools (it was a bad record with 0 tools).
#[test]
fn mcp_invalid_file_is_a_bad_record_and_snapshots_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = tmp.path().join("registry");
    std::fs::create_dir(&reg).unwrap();
    let schema = r#"{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}"#;
    std::fs::write(
        reg.join("github.json"),
        format!(
            r#"{{"server_info": {{"qualifiedName": "@acme/github", "displayName": "GitHub", "description": "GitHub API"}}, "tools": [{{"name": "search_issues", "description": "Search GitHub issues", "inputSchema": {schema}}}]}}"#
        ),
    )
    .unwrap();
    std::fs::write(reg.join("broken.json"), r#"{"server_info": {"name": "x"}, "tools": [ "#).unwrap();
    let summary = cli_build("mcp-tools", ("TOOLFORGE_MCP", &reg), tmp.path());
    let dir = tmp.path().join("out/mcp-tools");
    let r = json(&dir.join("report/verification.json"));
    assert_eq!(r["bad_records"], 1, "{summary}");
    assert_eq!(
        r["stats"]["servers_by_shape"],
        serde_json::json!({"snapshot": 1}),
        "{summary}"
    );
    assert_eq!(r["stats"]["tools_emitted"], 1);
}

#[test]
fn bfcl_rows_lint_and_determinism() {
    let (dir, _tmp) = build_twice_identical(
        "bfcl",
        &[
            "data/simple_python.parquet",
            "data/multiple.parquet",
            "data/parallel.parquet",
            "data/parallel_multiple.parquet",
            "data/irrelevance.parquet",
            "tools/functions.json",
            "report/verification.json",
            "report/bfcl_lint.json",
        ],
    );
    let r = json(&dir.join("report/verification.json"));
    let s = &r["stats"];
    // every official category file in shared/ is read by its name (issue 15)
    assert_eq!(
        s["questions"],
        serde_json::json!({"irrelevance": 240, "live_relevance": 16, "multiple": 200, "parallel": 200, "parallel_multiple": 200,
            "simple_java": 100, "simple_javascript": 50, "simple_python": 400})
    );
    assert_eq!(r["attempted"], 1406);
    assert_eq!(r["bad_records"], 0);
    // irrelevance: 240/240 kept, gold "no call"
    assert_eq!(r["per_group"]["irrelevance"]["kept"], 240);
    for row in rows(&dir, "irrelevance") {
        assert_eq!(row["output"], serde_json::json!([]), "{}", row["id"]);
        assert_eq!(field(&row, "meta")["expected"], "no_call");
    }
    // parallel: every gold call kept, as an unordered set
    let parallel = rows(&dir, "parallel");
    assert_eq!(parallel.len(), 200);
    for row in &parallel {
        let meta = field(row, "meta");
        let gold = meta["acceptable"].as_array().unwrap().len();
        assert!(gold >= 2, "{}", row["id"]);
        assert_eq!(row["output"].as_array().unwrap().len(), gold, "{}", row["id"]);
        assert_eq!(row["ordered"], false);
        assert_eq!(meta["call_order"], "any");
    }
    assert_catalog_valid(&dir);
    let by_kind = &s["lint_by_kind"];
    // what the lint finds on the real files (see the report for the list)
    let expected: Value = serde_json::from_str(include_str!("catalogs_bfcl_lint.json")).unwrap();
    assert_eq!(*by_kind, expected, "lint counts changed: {by_kind}");
    // the lint list is in the report, with the counts
    let lint = json(&dir.join("report/bfcl_lint.json"));
    assert_eq!(lint["lint_by_kind"], expected);
    assert_eq!(
        lint["findings"].as_array().unwrap().len() as u64,
        s["lint_findings"].as_u64().unwrap()
    );
    // every kept row's gold call names one of its tools
    for split in ["simple_python", "multiple", "parallel"] {
        for row in rows(&dir, split) {
            let tools = field(&row, "tools");
            let tools: Vec<&str> = tools
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            for c in row["output"].as_array().unwrap() {
                assert!(tools.contains(&c["name"].as_str().unwrap()), "{}", row["id"]);
            }
            assert!(field(&row, "meta")["acceptable"].is_array());
        }
    }
}

fn rows(dir: &Path, split: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("data/{split}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Issue 15: `live_simple`, `live_multiple` and `parallel_multiple` (not in shared/) build by
/// their official names through `TOOLFORGE_BFCL`; labels come from the file names; `null` means
/// "may be omitted"; an `enum` on an array applies to its items; system prompts are kept.
#[test]
fn bfcl_other_categories_by_official_name() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = cli_build(
        "bfcl",
        ("TOOLFORGE_BFCL", &root().join("tests/catalogs_bfcl")),
        tmp.path(),
    );
    assert_summary_counts_only(&summary);
    let dir = tmp.path().join("out/bfcl");
    let r = json(&dir.join("report/verification.json"));
    assert_eq!(
        r["stats"]["questions"],
        serde_json::json!({"live_multiple": 1, "live_simple": 2, "parallel_multiple": 1}),
        "{summary}"
    );
    assert_eq!(r["kept"], 4, "{}", r["dropped_list"]);
    assert_eq!(r["stats"]["lint_findings"], 0, "{}", r["stats"]["lint_by_kind"]);
    assert!(r["stats"].get("id_category_mismatch").is_none());
    let simple = rows(&dir, "live_simple");
    // null / "" acceptable: the optional parameters are omitted
    let args = |row: &Value, i: usize| -> Value {
        serde_json::from_str(row["output"][i]["arguments"].as_str().unwrap()).unwrap()
    };
    assert_eq!(simple[0]["output"][0]["name"], "lex_list_exports");
    assert_eq!(
        args(&simple[0], 0),
        serde_json::json!({"botId": "B12345", "botVersion": "v1", "sortBy": "DESC"})
    );
    // enum on an array: kept (it was gold_invalid), the enum moved to the items
    assert_eq!(
        args(&simple[1], 0),
        serde_json::json!({"metrics": ["temperature"], "models": ["MT10", "MT11"]})
    );
    let tools = field(&simple[1], "tools");
    assert_eq!(
        tools[0]["parameters"]["properties"]["models"]["items"]["enum"],
        serde_json::json!(["MT10", "MT11", "MT12"])
    );
    // the system prompt is kept: meta.system, and meta.messages is the turn as BFCL gives it
    let meta = field(&simple[1], "meta");
    assert!(
        meta["system"]
            .as_str()
            .unwrap()
            .starts_with("You are a terse assistant")
    );
    assert_eq!(meta["messages"][0]["role"], "system");
    assert_eq!(
        simple[1]["input"],
        "Get temperature readings from the MT10 and MT11 sensors."
    );
    assert_eq!(meta["category"], "live_simple");
    let multiple = rows(&dir, "live_multiple");
    assert_eq!(multiple[0]["split"], "live_multiple");
    assert!(field(&multiple[0], "meta")["system"].is_string());
    let pm = rows(&dir, "parallel_multiple");
    let names: Vec<_> = pm[0]["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["math_factorial", "geometry_circle_area"]);
    assert_eq!(pm[0]["ordered"], false);
}
