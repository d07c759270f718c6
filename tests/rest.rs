//! REST toolkits as a model sees them (issue 12), built from the real Spider and BIRD corpora:
//! one name per endpoint across `functions.json`, OpenAPI and MCP, unique over the whole
//! catalog; every gold call callable under that name over HTTP (`toolforge serve` on 127.0.0.1)
//! and over MCP (an rmcp client of `toolforge serve --mcp`), reproducing the gold answer; and a
//! toolkit a model can choose from: every endpoint has a query parameter, its summary names every
//! filter column with its operator and every parameter, and no two endpoints of a database share
//! a name or a summary (distinguishability 1.0 in `report/verification.json`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::Value;
use toolforge::emit::read_rows;
use toolforge::pipeline::build_and_emit;
use toolforge::verify::{Answer, answers_match_ties};

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

/// The (column, operator phrases) of every filter of `sql` — WHERE, HAVING, JOIN … ON, CASE and
/// nested queries — read with sqlparser independently of the summary generator; a comparison
/// matches either phrase of its operator (the summary may read `5 < a` as `a > 5`).
fn filters(sql: &str) -> Vec<(String, Vec<&'static str>)> {
    use sqlparser::ast::{BinaryOperator as B, Expr, visit_expressions};
    let stmt = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::SQLiteDialect {}, sql)
        .unwrap()
        .remove(0);
    let column = |e: &Expr| match e {
        Expr::Identifier(i) => Some(i.value.clone()),
        Expr::CompoundIdentifier(p) => p.last().map(|p| p.value.clone()),
        _ => None,
    };
    let mut out = Vec::new();
    let _ = visit_expressions(&stmt, |e: &Expr| {
        let found = match e {
            Expr::BinaryOp { left, op, right } => {
                let words: Vec<&'static str> = match op {
                    B::Eq => vec!["equals"],
                    B::NotEq => vec!["differs from"],
                    B::Gt | B::Lt => vec!["greater than", "less than"],
                    B::GtEq | B::LtEq => vec!["at least", "at most"],
                    _ => vec![],
                };
                column(left)
                    .or_else(|| column(right))
                    .filter(|_| !words.is_empty())
                    .map(|c| (c, words))
            }
            Expr::Like { expr, .. } | Expr::ILike { expr, .. } => column(expr).map(|c| (c, vec!["like pattern"])),
            Expr::Between { expr, .. } => column(expr).map(|c| (c, vec!["between"])),
            Expr::InList { expr, .. } => column(expr).map(|c| (c, vec!["one of"])),
            Expr::InSubquery { expr, .. } => column(expr).map(|c| (c, vec!["among"])),
            Expr::IsNull(x) => column(x).map(|c| (c, vec!["missing"])),
            Expr::IsNotNull(x) => column(x).map(|c| (c, vec!["present"])),
            _ => None,
        };
        out.extend(found);
        std::ops::ControlFlow::<()>::Continue(())
    });
    out
}

/// The toolkit checks of the module doc, on a built dataset.
fn check_toolkit(recipe: &str, dir: &Path) {
    let endpoints = read_json(&dir.join("tools/endpoints.json"));
    let mut names = BTreeSet::new();
    let mut summaries = BTreeSet::new();
    let mut missing = Vec::new();
    for e in endpoints.as_array().unwrap() {
        let db = e["db_id"].as_str().unwrap();
        let summary = e["summary"].as_str().unwrap();
        let lower = summary.to_lowercase();
        let params = e["parameters"].as_array().unwrap();
        assert!(!params.is_empty(), "{recipe}: {} has no parameter", e["name"]);
        for p in params {
            let name = p["name"].as_str().unwrap();
            if !summary.contains(&format!("{{{name}}}")) {
                missing.push(format!("{}: parameter {name}", e["name"]));
            }
        }
        for (column, words) in filters(e["sql"].as_str().unwrap()) {
            if !lower.contains(&column.to_lowercase()) || !words.iter().any(|w| lower.contains(w)) {
                missing.push(format!("{}: {column} {words:?} in {summary:?}", e["name"]));
            }
        }
        assert!(
            names.insert((db, e["name"].as_str().unwrap())),
            "{recipe}: name {}",
            e["name"]
        );
        assert!(
            summaries.insert((db, summary)),
            "{recipe}: {db} summary repeats: {summary}"
        );
    }
    assert!(
        missing.is_empty(),
        "{recipe}: {} omissions: {missing:#?}",
        missing.len()
    );
    let report = read_json(&dir.join("report/verification.json"));
    assert_eq!(report["stats"]["distinguishability"], 1.0, "{recipe}");
    assert_eq!(report["stats"]["parameterless_endpoints"], 0, "{recipe}");
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
        check_toolkit(recipe, &dir);
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
                .and_then(|v| serde_json::from_value(v["result"].clone()).ok());
            let gold = row.gold_answer.as_ref().unwrap();
            if result.is_error == Some(true)
                || !got.is_some_and(|g| answers_match_ties(gold, &g, row.ordered, row.ties.as_deref()))
            {
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
