//! The MCP catalog (`mcp-tools`) and BFCL (`bfcl`) builds on the real corpora in
//! ../shared/corpora: counts, every emitted schema valid, the BFCL gold lint, determinism.

use std::path::{Path, PathBuf};

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

fn build_twice_identical(recipe: &str, files: &[&str]) -> (PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let r = root().join(format!("recipes/{recipe}.toml"));
    let (out, store) = (tmp.path().join("out"), tmp.path().join("store"));
    let summary = build_and_emit(&r, Some(&out), Some(&store), false).unwrap();
    assert!(summary.contains("wrote"), "{summary}");
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
    assert_eq!(s["tools_rejected"], 0, "{}", s["rejected_list"]);
    // Desktop Commander MCP and Filesystem MCP Server share 5 identical tools
    assert_eq!(s["tools_deduplicated"], 5);
    assert_eq!(s["tools_emitted"], 522);
    // fixes are counted over the emitted (deduplicated) tools: 161 declare draft-07, 5 of them duplicates
    assert_eq!(s["fixes_by_kind"]["schema_uri_removed"], 156);
    assert_eq!(r["bad_records"], 0);
    let emitted = assert_catalog_valid(&dir);
    assert_eq!(emitted, 522);
    // the MCP catalog keeps server identity: every emitted tool under its server(s)
    let mcp = json(&dir.join("tools/mcp.json"));
    let servers = mcp["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 70);
    let listed: usize = servers.iter().map(|s| s["tools"].as_array().unwrap().len()).sum();
    assert_eq!(
        listed, 527,
        "each server lists all its tools, deduplicated ones included"
    );
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
    assert!(rows.len() >= 190, "{} bundles", rows.len());
    for row in &rows {
        let meta = field(row, "meta");
        let refs = meta["reference_tools"].as_array().unwrap();
        assert_eq!(refs.len(), 5);
        assert_eq!(refs[0]["role"], "seed");
        let servers: std::collections::BTreeSet<_> = refs.iter().map(|t| t["server"].as_str().unwrap()).collect();
        assert!(servers.len() >= 2);
        assert_eq!(field(row, "tools").as_array().unwrap().len(), 5);
    }
}

#[test]
fn bfcl_rows_lint_and_determinism() {
    let (dir, _tmp) = build_twice_identical(
        "bfcl",
        &[
            "data/simple_python.parquet",
            "data/multiple.parquet",
            "tools/functions.json",
            "report/verification.json",
        ],
    );
    let r = json(&dir.join("report/verification.json"));
    let s = &r["stats"];
    assert_eq!(s["questions"]["simple_python"], 400);
    assert_eq!(s["questions"]["multiple"], 200);
    assert_eq!(r["attempted"], 600);
    assert_eq!(r["bad_records"], 0);
    assert_catalog_valid(&dir);
    let by_kind = &s["lint_by_kind"];
    // what the lint finds on the real files (see the report for the list)
    let expected: Value = serde_json::from_str(include_str!("catalogs_bfcl_lint.json")).unwrap();
    assert_eq!(*by_kind, expected, "lint counts changed: {by_kind}");
    // every kept row's gold call names one of its tools
    for split in ["simple_python", "multiple"] {
        for l in std::fs::read_to_string(dir.join(format!("data/{split}.jsonl")))
            .unwrap()
            .lines()
        {
            let row: Value = serde_json::from_str(l).unwrap();
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
