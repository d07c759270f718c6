//! REST toolkits as a model sees them (issue 12), built from the real Spider and BIRD corpora:
//! one name per endpoint across `functions.json`, OpenAPI and MCP, unique over the whole
//! catalog; every gold call callable under that name over HTTP (`toolforge serve` on 127.0.0.1)
//! and over MCP (an rmcp client of `toolforge serve --mcp`), reproducing the gold answer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::Value;
use toolforge::emit::{build_and_emit, read_rows};
use toolforge::verify::{Answer, answers_match};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn databases(recipe: &str) -> PathBuf {
    match recipe {
        "rest-bird" => root().join("../shared/corpora/bird/dev_databases"),
        _ => root().join("../shared/corpora/spider/database"),
    }
}

fn build(recipe: &str, tmp: &Path) -> PathBuf {
    let out = tmp.join("out");
    build_and_emit(
        &root().join(format!("recipes/{recipe}.toml")),
        Some(&out),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    out.join(recipe)
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// The names a dataset's three interfaces give its endpoints.
fn catalog_names(dir: &Path) -> (Vec<String>, Vec<String>, Vec<String>) {
    let functions: Vec<String> = read_json(&dir.join("tools/functions.json"))
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"]["name"].as_str().unwrap().to_string())
        .collect();
    let openapi = read_json(&dir.join("tools/openapi.json"));
    let operation_ids: Vec<String> = openapi["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p["get"]["operationId"].as_str().unwrap().to_string())
        .collect();
    let endpoints: Vec<String> = read_json(&dir.join("tools/endpoints.json"))
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    (functions, operation_ids, endpoints)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_gold_call_is_callable_under_its_one_catalog_name_over_http_and_mcp() {
    let tmp = tempfile::tempdir().unwrap();
    for recipe in ["rest-spider", "rest-bird"] {
        let dir = build(recipe, tmp.path());
        let (functions, operation_ids, endpoints) = catalog_names(&dir);
        let unique: BTreeSet<&String> = functions.iter().collect();
        assert_eq!(unique.len(), functions.len(), "{recipe}: a function name repeats");
        for name in &functions {
            assert!(name.len() <= 64, "{name}");
        }
        assert_eq!(functions, operation_ids, "{recipe}: OpenAPI operation ids");
        assert_eq!(functions, endpoints, "{recipe}: endpoints.json names");

        // HTTP: every row's gold call on its path, answer compared with gold_answer.
        let (ok, bad) = toolforge::serve::verify_live(&dir, Some(&databases(recipe))).unwrap();
        assert_eq!(bad, 0, "{recipe}");
        assert!(ok > 0);

        // MCP: the same names, every gold call by name.
        let transport = TokioChildProcess::new(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_toolforge")).configure(|cmd| {
                cmd.arg("serve")
                    .arg(&dir)
                    .arg("--mcp")
                    .arg("--databases")
                    .arg(databases(recipe));
            }),
        )
        .unwrap();
        let client = ().serve(transport).await.unwrap();
        let tools: BTreeSet<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(
            tools,
            unique.iter().map(|s| s.to_string()).collect(),
            "{recipe}: MCP tool names"
        );
        let mut failures: BTreeMap<String, String> = BTreeMap::new();
        for row in read_rows(&dir).unwrap() {
            let call = &row.output[0];
            let result = client
                .call_tool(CallToolRequestParams::new(call.name.clone()).with_arguments(call.arguments.clone()))
                .await
                .unwrap();
            let got: Option<Answer> = result
                .structured_content
                .clone()
                .and_then(|v| serde_json::from_value(v).ok());
            let gold = row.gold_answer.as_ref().unwrap();
            if result.is_error == Some(true) || !got.is_some_and(|g| answers_match(gold, &g, row.ordered)) {
                failures.insert(row.id.clone(), format!("{result:?}"));
            }
        }
        client.cancel().await.unwrap();
        assert!(
            failures.is_empty(),
            "{recipe}: {} MCP calls differ: {failures:?}",
            failures.len()
        );
    }
}
